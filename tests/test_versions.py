"""Locked installs and the tested transformers range (issue 26): the lock pins everything (torch
at the CPU wheel's version), make demo/test install from it, make test runs both range ends,
and the range every check reads is pyproject's."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from packaging.specifiers import SpecifierSet

from specdec_core.pairs import versions

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"


def lock_pins() -> dict[str, str]:
    lines = [l for l in LOCK.read_text().splitlines() if l.strip() and not l.startswith("#")]
    assert all(re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[^=\s]+", l) for l in lines), \
        [l for l in lines if "==" not in l]
    return {l.split("==")[0].lower().replace("_", "-"): l.split("==")[1] for l in lines}


def test_lock_pins_every_package_and_the_cpu_torch():
    pins = lock_pins()
    assert pins["torch"] == "2.13.0"                 # no +cpu label: matches the local CPU wheel
    assert "specscope" not in pins                    # the project itself is installed editable
    for dep in ("transformers", "tokenizers", "gradio", "pytest", "playwright", "ray", "matplotlib"):
        assert dep in pins, dep


def test_declared_range_is_read_from_pyproject_and_holds_the_lock():
    spec = versions.tested_range()
    assert spec and spec.startswith(">=5.0.0")
    assert f'"transformers{spec}"' in (ROOT / "pyproject.toml").read_text()
    assert lock_pins()["transformers"] in SpecifierSet(spec)


def test_make_installs_from_the_lock_and_tests_both_range_ends():
    mk = (ROOT / "Makefile").read_text()
    # (uv from a pinned release installs the lock's lines, pip the same lines should it fail)
    dry = subprocess.run(["make", "-n", "-B", "--no-print-directory", "install-test",
                          "PIP_FIND_LINKS=/w1 /w2"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60).stdout.splitlines()
    assert any(re.fullmatch(r"\.venv/bin/pip install -q uv==[0-9.]+", ln) for ln in dry), dry
    uv = ".venv/bin/uv pip install -q --compile-bytecode --python .venv/bin/python --find-links /w1 --find-links /w2 "
    for what in ("-c requirements.lock torch", "-c requirements.lock -e '.[test,bench,scale]'"):
        line = next(ln for ln in dry if ln.startswith(uv + what + " || "))
        assert line.endswith(f".venv/bin/pip install -q {what}; }}"), line
    assert dry.index(next(ln for ln in dry if "lock torch" in ln)) < dry.index(next(ln for ln in dry if "-e '" in ln))
    assert "LOCK := requirements.lock" in mk and "$(VENV)/.installed: $(BIN)/python $(BIN)/uv pyproject.toml $(LOCK)" in mk
    test = mk.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "pytest -q -ra -n $(PYTEST_WORKERS) --dist loadfile" in test
    # the range ends' virtualenvs build in the background beside the suite; after it the floor and
    # the middle run side by side (one process each) and are reported, then the newest
    before, after = test.split("pytest -q", 1)
    assert "RANGE_BUILD_ONLY=1" in before and "&" in before
    assert "(PY=$(PY) PIP=$(BIN)/pip PYTEST_WORKERS=0 scripts/range_test.sh $$end" in after
    assert "echo $$? >test-artifacts/range-$$end.rc) & done; scripts/range_test.sh report oldest middle" in after
    assert "scripts/range_test.sh newest" in after
    rng = mk.split("\ntest-range:", 1)[1].split("\n\n", 1)[0]
    assert all(f"range_test.sh {end}" in rng for end in ("oldest", "middle", "newest"))
    assert "scripts/lock.sh" in mk.split("\nlock:", 1)[1]
    assert (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1] == "make test"


def test_range_report_prints_the_runs_and_fails_on_a_failed_or_missing_one():
    """`range_test.sh report END...` (after make test's suite): each end's log, in order, then
    exit 1 when one exited non-zero or wrote no status within RANGE_WAIT_S."""
    import uuid

    art = ROOT / "test-artifacts"
    art.mkdir(exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    ok, bad, gone = (f"selftest-{tag}-{n}" for n in ("ok", "bad", "gone"))
    try:
        for end, rc in ((ok, 0), (bad, 3)):
            (art / f"range-{end}.log").write_text(f"log of {end}\n")
            (art / f"range-{end}.rc").write_text(f"{rc}\n")
        run = lambda *ends: subprocess.run(["bash", str(ROOT / "scripts" / "range_test.sh"), "report", *ends],
                                           capture_output=True, text=True, env={**os.environ, "RANGE_WAIT_S": "1"})
        p = run(ok)
        assert p.returncode == 0 and p.stdout == f"log of {ok}\n", (p.stdout, p.stderr)
        p = run(ok, bad, gone)
        assert p.returncode == 1
        assert f"log of {ok}" in p.stdout and f"log of {bad}" in p.stdout
        assert f"range: the {bad} run failed (exit 3;" in p.stderr
        assert f"range: the {gone} run did not finish within 1 s" in p.stderr
    finally:
        for f in art.glob(f"range-selftest-{tag}-*"):
            f.unlink()


def _range(which: str, tmp_path: Path, newest: str = "9.9.9") -> list[str]:
    pip = tmp_path / "pip"      # what `pip index versions transformers` prints
    pip.write_text(f"#!/bin/sh\necho 'transformers ({newest})'\necho 'Available versions: {newest}'\n")
    pip.chmod(0o755)
    env = dict(os.environ, RANGE_DRY_RUN="1", PIP=str(pip), SPECSCOPE_CLOUD_VENV_ROOT=str(tmp_path))
    p = subprocess.run(["bash", str(ROOT / "scripts" / "range_test.sh"), which], capture_output=True,
                       text=True, env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.split()


def test_range_script_picks_both_ends(tmp_path):
    which, version, venv = _range("oldest", tmp_path)
    assert version == versions.tested_range().split(",")[0].lstrip(">=")
    assert Path(venv).parent == tmp_path and Path(venv).name.startswith(f"tf-{version}-")
    assert _range("newest", tmp_path, "5.99.0")[1] == "5.99.0"
    # newest == the lock's transformers: the whole suite already ran on it
    out = " ".join(_range("newest", tmp_path, lock_pins()["transformers"]))
    assert "skipped" in out and "lock" in out


def test_range_script_picks_the_median_release_between_the_ends(tmp_path):
    pip = tmp_path / "pip"
    listed = "5.3.0, 5.2.0, 5.1.0, 5.0.0, 4.57.6, 5.1.0rc1"
    pip.write_text(f"#!/bin/sh\necho 'transformers (5.3.0)'\necho 'Available versions: {listed}'\n")
    pip.chmod(0o755)
    env = dict(os.environ, RANGE_DRY_RUN="1", PIP=str(pip), SPECSCOPE_CLOUD_VENV_ROOT=str(tmp_path))
    p = subprocess.run(["bash", str(ROOT / "scripts" / "range_test.sh"), "middle"],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[:2] == ["middle", "5.2.0"]     # 5.0.0 5.1.0 [5.2.0] 5.3.0


def test_audio_only_processor_gets_stand_ins_only_where_transformers_reads_them():
    """compat.audio_only_processor: before 5.23 the Omni processor reads image/video merge_size
    for audio-only prompts too; newer processors are left untouched."""
    from devtools.omni_tiny import omni_processor

    p = omni_processor()
    old_api = hasattr(type(p), "replace_multimodal_special_tokens")
    assert (p.image_processor is not None) == old_api
    assert (p.video_processor is not None) == old_api
    ids = p(text=["<|audio_bos|><|AUDIO|><|audio_eos|>说话人"], audio=[[0.0] * 16000],
            return_tensors="pt", padding=True)["input_ids"][0].tolist()
    assert ids.count(p.tokenizer.convert_tokens_to_ids("<|AUDIO|>")) > 1   # expanded to the clip


def test_range_runs_the_api_seam_tests_and_each_exists():
    """The range runs a list of the suite's own seam tests (node ids in scripts/range_test.sh),
    not whole recorder files: every id names a file and a test function that exist, so a rename
    breaks this test on the lock rather than the range run at the end of make test."""
    text = (ROOT / "scripts" / "range_test.sh").read_text()
    seams = text.split('SEAMS="', 1)[1].split('"', 1)[0].split()
    assert 'RANGE_TESTS="${RANGE_TESTS:-$SEAMS}"' in text and len(seams) >= 10
    for seam in seams:
        path, _, name = seam.partition("::")
        assert (ROOT / path).is_file(), seam
        assert not name or re.search(rf"^def {re.escape(name)}\(", (ROOT / path).read_text(), re.M), seam
    files = {s.split("::")[0] for s in seams}
    assert {"tests/test_engine.py", "tests/test_omni.py", "tests/test_recorder_families.py",
            "tests/test_check.py"} <= files and "tests/test_recorder_compiled.py" not in files


def test_the_builds_beside_the_suite_take_only_idle_cpu():
    """make test builds llama-server in the background beside the suite (niced: on a busy machine
    the suite's CPU is the tests'), and fetching its source sdist builds nothing: with
    `--no-binary :all:` pip built every build dependency of the sdist from source to read its
    metadata, 280+ CPU s at nice 0 during the suite on a fresh machine (a sampler of the
    processes' CPU time found it: 'pip' before the tests, the app and chromium)."""
    mk = (ROOT / "Makefile").read_text()
    test = mk.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "(nice -n 19 scripts/cloud/llama.sh build " in test
    sh = (ROOT / "scripts" / "cloud" / "llama.sh").read_text()
    download = [ln for ln in sh.splitlines() if "pip download" in ln and not ln.lstrip().startswith("#")]
    assert download and all('--no-binary "llama-cpp-python"' in ln and ":all:" not in ln for ln in download)
