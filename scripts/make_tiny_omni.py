"""Write tiny random-init Qwen2.5-Omni thinker folders to try the Omni backend and the recorder
without downloading weights (CPU, a few MB, seconds):

    python scripts/make_tiny_omni.py OUT_DIR
    export SPECSCOPE_EDGE_MODEL=OUT_DIR/edge SPECSCOPE_CLOUD_MODEL=OUT_DIR/cloud SPECSCOPE_OMNI_FORCE_CPU=1
    python -m specdec_core record examples/decoders/omni/omni_correct.py sample_audio/angry_01.wav --backend omni

OUT_DIR/cloud is a random-init tiny thinker, OUT_DIR/edge a perturbed copy (some drafts are
rejected). Both heads are 160 rows wide for a 149-token tokenizer, like real Qwen heads. The
text they write is gibberish: they exist to exercise decoders, not to describe emotions.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python scripts/make_tiny_omni.py OUT_DIR", file=sys.stderr)
        return 2
    from devtools.omni_tiny import make_tiny_pair   # torch + transformers: slow

    try:
        paths = make_tiny_pair(args[0])
    except OSError as e:
        print(f"make_tiny_omni: cannot write {args[0]}: {e.strerror or e}", file=sys.stderr)
        return 1
    print(f"SPECSCOPE_EDGE_MODEL={paths['edge']}\nSPECSCOPE_CLOUD_MODEL={paths['cloud']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
