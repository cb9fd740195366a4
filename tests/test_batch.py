"""Batch runs over manifests with bad clips: every good clip completes, bad ones carry one-line
errors, JSON/CSV agree with the table; the `batch` CLI end to end."""
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from cli_many import run_many
from tiny import PairBackend, char_tokenizer, perturbed, tiny_qwen2

from specdec_core.cli.reports import batch_report
from specdec_core.decoding.config import DecodeConfig
from specdec_core.evaluation.batch.run import BatchResult, iter_batch
from specdec_core.evaluation.batch.manifest import Clip, clips_from_uploads, read_manifest
from specdec_core.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_audio"
DEMO_READY = (ROOT / "specdec_core/demo/models/cloud/config.json").is_file()
GOOD = ["neutral_03", "angry_01", "sad_03"]


class AudioPair(PairBackend):
    """The tiny pair with a prompt built from the real audio: it loads every clip like the demo
    backend does (so bad files fail in load_audio), and the prompt depends on the clip."""

    needs_audio = True

    def build_inputs(self, audio, prompt_type, ids=None):
        if audio.name == "boom.wav":  # a backend bug on one clip: the batch must survive it
            raise RuntimeError("backend exploded\nsecond line of the traceback text")
        head = [1, 5] if prompt_type == "detailed" else [1, 8]
        return super().build_inputs(audio, prompt_type, head + [10 + int(audio.duration * 7) % 30])


@pytest.fixture(scope="module")
def backend():
    tok = char_tokenizer()
    cloud = tiny_qwen2(len(tok), seed=3)
    return AudioPair(perturbed(cloud, 0.4, seed=1), cloud, tok)


CFG = DecodeConfig(max_new_tokens=20, min_new_tokens=4)


def small_manifest(tmp_path: Path) -> Path:
    """3 bundled clips + a text file named bad.wav + a missing file + a bad label, with an
    extra column."""
    src = pd.read_csv(SAMPLES / "manifest.csv", keep_default_na=False).set_index("name")
    lines = ["name,path,label,prompt_type,reference,speaker"]
    for name in GOOD:
        shutil.copy(SAMPLES / f"{name}.wav", tmp_path / f"{name}.wav")
        r = src.loc[name]
        lines.append(f"{name},{name}.wav,{r.label},{r.prompt_type},{r.reference},spk1")
    (tmp_path / "bad.wav").write_text("this is not audio\n", encoding="utf-8")
    lines += ["bad,bad.wav,happy,detailed,,spk2",
              "missing,clips/missing.wav,sad,,,spk3",
              "badlabel,angry_01.wav,furious,detailed,,spk4"]
    path = tmp_path / "manifest.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# --- manifests -------------------------------------------------------------------------------

def test_read_bundled_manifest():
    clips = read_manifest(SAMPLES / "manifest.csv")
    assert len(clips) == 18
    assert all(Path(c.path).is_absolute() and Path(c.path).is_file() and c.error is None for c in clips)
    assert {c.label for c in clips} == {"neutral", "angry", "happy", "sad", "worried", "surprise"}
    assert {c.prompt_type for c in clips} == {"detailed", "concise"}
    assert all(c.reference for c in clips)


def test_manifest_bad_rows_are_kept_with_errors(tmp_path):
    clips = {c.name: c for c in read_manifest(small_manifest(tmp_path))}
    assert [clips[n].error for n in GOOD] == [None] * 3
    assert clips["neutral_03"].speaker == "spk1" and clips["neutral_03"].extra == {}
    assert clips["bad"].error is None                      # exists; fails when decoded
    assert clips["missing"].error == "audio file not found: clips/missing.wav"
    assert clips["missing"].prompt_type is None            # empty = the config's
    assert "invalid label 'furious'" in clips["badlabel"].error


@pytest.mark.parametrize("content,msg", [
    (b"\x00\x01RIFF\xff\xfe binary", "not a"),
    ("neutral_01,neutral_01.wav,neutral\n".encode(), "no 'path' column"),
    (b"", "empty"),
    (b"name,path,label\n", "lists no clips"),
])
def test_manifest_that_is_not_a_manifest_raises(tmp_path, content, msg):
    p = tmp_path / "m.csv"
    p.write_bytes(content)
    with pytest.raises(UserError, match=msg) as e:
        read_manifest(p)
    assert "\n" not in str(e.value)
    with pytest.raises(UserError, match="not found"):
        read_manifest(tmp_path / "nope.csv")


def test_clips_from_uploads_match_by_file_name(tmp_path):
    upload_dir, csv_dir = tmp_path / "uploads", tmp_path / "csv"
    upload_dir.mkdir(), csv_dir.mkdir()
    for n in ("neutral_03", "sad_03"):
        shutil.copy(SAMPLES / f"{n}.wav", upload_dir / f"{n}.wav")
    csv_path = csv_dir / "m.csv"
    csv_path.write_text("name,path,label\na,some/dir/neutral_03.wav,neutral\nb,SAD_03.WAV,sad\n"
                        "c,angry_01.wav,angry\n", encoding="utf-8")
    files = [str(upload_dir / "neutral_03.wav"), upload_dir / "sad_03.wav"]
    clips = clips_from_uploads(str(csv_path), files)
    assert [Path(c.path).name for c in clips[:2]] == ["neutral_03.wav", "sad_03.wav"]
    assert clips[0].error is None and clips[1].error is None
    assert clips[2].error == "clip angry_01.wav was not uploaded"
    alone = clips_from_uploads(None, files)
    assert [(c.name, c.label) for c in alone] == [("neutral_03", None), ("sad_03", None)]
    with pytest.raises(UserError):
        clips_from_uploads(None, [])
    # upload objects of a web framework are the UI's business: the engine takes paths only
    with pytest.raises(UserError, match="must be file paths"):
        clips_from_uploads(None, [{"path": str(upload_dir / "sad_03.wav")}])


# --- batch runs ------------------------------------------------------------------------------

def test_batch_with_bad_clips_completes_and_exports_agree(tmp_path, backend):
    clips = read_manifest(small_manifest(tmp_path))
    clips.append(Clip("boom", str(tmp_path / "boom.wav"), label="sad"))
    shutil.copy(SAMPLES / "sad_01.wav", tmp_path / "boom.wav")
    configs = {"A": CFG, "B": CFG.replace(k=2)}
    events = list(iter_batch(backend, clips, configs))
    progress, done = events[:-1], events[-1]
    total = len(clips) * 2
    assert [e["done"] for e in progress] == list(range(1, total + 1))
    assert all(e["type"] == "progress" and e["total"] == total for e in progress)
    assert done["type"] == "done"
    res: BatchResult = done["result"]
    assert len(res.rows) == total

    rows = {(r["config"], r["name"]): r for r in res.rows}
    for cfg in "AB":
        for name in GOOD:
            r = rows[cfg, name]
            assert r["ok"] and r["error"] is None and r["text"] is not None
            assert r["metrics"]["new_tokens"] >= 1 and r["trace"]["token_ids"] == r["token_ids"]
            assert r["scores"]["chrf"] is not None and r["scores"]["emotion_hit"] is not None
        errors = {n: rows[cfg, n]["error"] for n in ("bad", "missing", "badlabel", "boom")}
        assert all(not rows[cfg, n]["ok"] for n in errors)
        assert all(e and "\n" not in e for e in errors.values()), errors
        assert "bad.wav" in errors["bad"]
        assert errors["missing"] == "audio file not found: clips/missing.wav"
        assert errors["boom"] == "internal error: RuntimeError: backend exploded"
        assert "Traceback" in rows[cfg, "boom"]["traceback"]
        s = res.summary[cfg]
        assert (s["n"], s["ok"], s["failed"]) == (7, 3, 4)
        assert {e["name"] for e in s["errors"]} == set(errors)
        assert s["n_labeled"] == 3 and s["chrf_mean"] is not None and s["weighted_f1"] is not None
        assert res.checklist[cfg][0]["value"] == "3 of 7"
    # the clip's prompt type overrides the config's, and reaches the decoder
    assert rows["A", "neutral_03"]["prompt_type"] == "concise"
    assert rows["A", "neutral_03"]["trace"]["config"]["prompt_type"] == "concise"
    assert rows["A", "angry_01"]["trace"]["config"]["prompt_type"] == "detailed"
    # greedy speculative decoding is lossless: k changes the rounds, not the text
    assert all(rows["A", n]["text"] == rows["B", n]["text"] for n in GOOD)
    assert res.failed == 8

    paths = res.write(tmp_path / "out")
    frame = res.to_frame()
    csv = pd.read_csv(paths["csv"], keep_default_na=True)
    data = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert len(frame) == len(csv) == len(data["rows"]) == total
    assert list(csv.columns) == list(frame.columns)
    for col in ("config", "name", "ok", "error", "text", "hanzi_count", "acceptance_rate",
                "punct_density", "ended_by", "chrf", "emotion"):
        a, b = frame[col].tolist(), csv[col].tolist()
        j = [r.get(col, r["metrics"].get(col, r["scores"].get(col))) for r in data["rows"]]
        for x, y, z in zip(a, b, j):
            if x is None or (isinstance(x, float) and pd.isna(x)):
                assert pd.isna(y) and z is None, (col, x, y, z)
            elif isinstance(x, float):
                assert y == pytest.approx(x) and z == pytest.approx(x), col
            else:
                assert x == y == z, (col, x, y, z)
    summary = json.loads(paths["summary"].read_text(encoding="utf-8"))
    assert summary["summary"]["A"]["failed"] == 4 and set(summary["checklist"]) == {"A", "B"}
    assert data["configs"]["B"]["k"] == 2
    text = batch_report(res)
    assert "config A: 7 clips, 3 ok, 4 failed" in text and "checklist B" in text


def test_batch_rejects_nothing_to_run(backend):
    with pytest.raises(UserError):
        list(iter_batch(backend, [], {"A": CFG}))
    with pytest.raises(UserError):
        list(iter_batch(backend, read_manifest(SAMPLES / "manifest.csv")[:1], {}))


# --- CLI -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory):
    """The module's `batch` command lines in one CLI process (tests/cli_many.py: a process start
    costs more than most of these lines' own work), by name; each case's folder under "dir"."""
    d = tmp_path_factory.mktemp("cli")
    for sub in ("usage", "hf", "demo"):
        (d / sub).mkdir()
    bad = d / "usage" / "m.csv"
    bad.write_bytes(b"\x00\x01\x02")
    tok = char_tokenizer()
    cloud = tiny_qwen2(len(tok), seed=3)
    for name, model in (("edge", perturbed(cloud, 0.4, seed=1)), ("cloud", cloud)):
        model.save_pretrained(d / "hf" / name)
        tok.save_pretrained(d / "hf" / name)
    cases = {"not_a_manifest": [bad, "--out", d / "usage" / "out"],
             "bad_knob": [SAMPLES / "manifest.csv", "--out", d / "usage" / "out", "--set", "k=0"],
             "hf": [small_manifest(d / "hf"), "--backend", "hf", "--edge-model", d / "hf" / "edge",
                    "--cloud-model", d / "hf" / "cloud", "--prompt", "说话人", "--set", "max_new_tokens=12",
                    "--out", d / "hf" / "out"]}
    if DEMO_READY:
        cases["demo"] = [small_manifest(d / "demo"), "--out", d / "demo" / "out", "--set", "max_new_tokens=48"]
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return dict(zip(cases, run_many([["batch", *argv] for argv in cases.values()], env=env)), dir=d)


def test_cli_usage_errors_exit_2(cli_runs):
    p = cli_runs["not_a_manifest"]
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "not a" in p.stderr
    p = cli_runs["bad_knob"]
    assert p.returncode == 2 and "k must be" in p.stderr and "Traceback" not in p.stderr


def test_cli_batch_hf_backend_tiny_models(cli_runs):
    """The CLI end to end on a registered backend that needs no shipped models: the tiny pair
    saved as HF folders, loaded by the hf backend (text prompt, so only the missing file fails)."""
    out = cli_runs["dir"] / "hf" / "out"
    p = cli_runs["hf"]
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr
    assert "[6/6] A badlabel: error: invalid label 'furious'" in p.stderr
    assert "failed  missing: audio file not found: clips/missing.wav" in p.stdout
    assert "checklist A" in p.stdout
    data = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert [r["ok"] for r in data["rows"]] == [True, True, True, True, False, False]
    assert len(pd.read_csv(out / "results.csv")) == 6 and (out / "summary.json").is_file()


@pytest.mark.skipif(not DEMO_READY, reason="demo models not trained yet (specdec_core/demo/models)")
def test_cli_batch_demo_with_bad_files(cli_runs):
    out = cli_runs["dir"] / "demo" / "out"
    p = cli_runs["demo"]
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr
    data = json.loads((out / "results.json").read_text(encoding="utf-8"))
    rows = {r["name"]: r for r in data["rows"]}
    assert all(rows[n]["ok"] and rows[n]["text"] for n in GOOD)
    assert not rows["bad"]["ok"] and "bad.wav" in rows["bad"]["error"]
    assert "\n" not in rows["bad"]["error"]
    assert data["summary"]["A"]["failed"] == 3
    csv = pd.read_csv(out / "results.csv")
    assert csv["ok"].tolist() == [rows[n]["ok"] for n in csv["name"]]
    assert "config A: 6 clips, 3 ok, 3 failed" in p.stdout
