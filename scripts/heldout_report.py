"""Per-clip listening report on a manifest: the bins read, the emotion the demo cloud names
(greedy, so exactly the cloud's own description), and whether it is right.

    .venv/bin/python scripts/heldout_report.py sample_audio/heldout2/manifest.csv [--by-speaker]

Without --by-speaker every clip is read on its own (register estimate); with it, clips that
share the manifest's `speaker` column are normalised per speaker (a batch run does this).
Prints a Markdown table and the totals (docs/listening.md and the README quote them).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from devtools import demo_corpus  # noqa: E402
from specdec_core import api  # noqa: E402
from specdec_core.audio import conditions as C, prosody  # noqa: E402
from specdec_core.audio.loading import load_audio  # noqa: E402
from specdec_core.backends import load_backend  # noqa: E402
from specdec_core.decoding.config import DecodeConfig  # noqa: E402
from specdec_core.evaluation.batch.manifest import read_manifest  # noqa: E402
from specdec_core.evaluation.batch.scoring import emotion_of_text  # noqa: E402


def report(manifest: str, by_speaker: bool) -> list[dict]:
    clips = read_manifest(manifest)
    norms = prosody.speaker_stats([(c.speaker, c.path) for c in clips]) if by_speaker else {}
    backend = load_backend("demo")
    cfg = DecodeConfig(max_new_tokens=96)
    out = []
    for c in clips:
        st = norms.get(c.speaker)
        p = prosody.extract(load_audio(c.path), speaker=st)
        res = api.run_clip(backend, c.path, cfg, speaker=st)
        named = emotion_of_text(res["text"]) if res["ok"] else None
        out.append({"name": c.name, "label": c.label, "kind": c.extra.get("kind", ""), "bins": p.bins,
                    "rule": demo_corpus.label_for(p.bins), "named": named, "text": res.get("text") or res.get("error"),
                    "norm": p.normalisation})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("manifest")
    ap.add_argument("--by-speaker", action="store_true")
    args = ap.parse_args()
    rows = report(args.manifest, args.by_speaker)
    print("| clip | kind | truth | bins (pitch/pvar/energy/rate/pause) | norm | cloud names | right | arousal |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        ok = r["named"] == r["label"]
        ar = r["named"] is not None and demo_corpus.AROUSAL[r["named"]] == demo_corpus.AROUSAL[r["label"]]
        bins = "/".join(r["bins"][f] for f in C.FEATURES)
        print(f"| {r['name']} | {r['kind']} | {r['label']} | {bins} | {r['norm']} | {r['named']} | "
              f"{'yes' if ok else 'no'} | {'yes' if ar else 'no'} |")
    n = len(rows)
    right = sum(r["named"] == r["label"] for r in rows)
    aro = sum(r["named"] is not None and demo_corpus.AROUSAL[r["named"]] == demo_corpus.AROUSAL[r["label"]] for r in rows)
    print(f"\nemotion right {right}/{n}, arousal right {aro}/{n}, "
          f"distinct emotions named {len({r['named'] for r in rows} - {None})}")


if __name__ == "__main__":
    main()
