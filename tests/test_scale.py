"""`batch --engine ray` (a local Ray, the real demo models, real audio): the same rows and token
ids as the local engine, one results.jsonl line per row as it finishes, a killed batch that
loses nothing and `--resume` completes, a worker that dies costing its row only."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from cli_many import run_many
from specdec_core.decoding.config import DecodeConfig
from specdec_core.evaluation.batch.journal import read_rows
from specdec_core.evaluation.batch.manifest import read_manifest
from specdec_core.evaluation.batch.ray_engine import LOCAL_RAY
from specdec_core.evaluation.batch.scale import run_batch_dir

# `ray start` turns token auth on, and a driver sends its token only in token mode, which Ray
# reads when it is imported (RayEdges sets it for a join, too late in this process: ray is
# imported here): on for the import only, so no process a test starts inherits it
_mode = os.environ.get("RAY_AUTH_MODE")
os.environ["RAY_AUTH_MODE"] = "token"
try:
    ray = pytest.importorskip("ray", reason="the scale extra is not installed (pip install -e '.[scale]')")
finally:
    if _mode is None:
        del os.environ["RAY_AUTH_MODE"]
    else:
        os.environ["RAY_AUTH_MODE"] = _mode

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_audio"
GOOD = ["neutral_03", "angry_01", "sad_03"]
SPEC = {"backend": "demo"}
KNOBS = ("--set", "max_new_tokens=24")
CFG = DecodeConfig(max_new_tokens=24)
LONG = DecodeConfig(max_new_tokens=64, stop_at_first_sentence=False)    # rows long enough to stop midway

pytestmark = pytest.mark.skipif(not (ROOT / "specdec_core/demo/models/cloud/config.json").is_file(),
                                reason="demo models not trained yet")


def broken_manifest(tmp_path: Path) -> Path:
    """3 bundled clips and a text file named bad.wav (not audio) in the middle."""
    src = pd.read_csv(SAMPLES / "manifest.csv", keep_default_na=False).set_index("name")
    (tmp_path / "bad.wav").write_text("this is not audio\n", encoding="utf-8")
    lines = ["name,path,label,prompt_type,reference"]
    for name in GOOD[:2] + ["bad"] + GOOD[2:]:
        if name == "bad":
            lines.append("bad,bad.wav,happy,detailed,")
            continue
        shutil.copy(SAMPLES / f"{name}.wav", tmp_path / f"{name}.wav")
        r = src.loc[name]
        lines.append(f"{name},{name}.wav,{r.label},{r.prompt_type},{r.reference}")
    path = tmp_path / "manifest.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "specdec_core", "batch", *map(str, args)],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=_env())


def _env():
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1", "HOME": os.environ.get("HOME", "/tmp")}


RAY_BIN = str(Path(sys.executable).with_name("ray"))


@pytest.fixture(scope="module")
def cluster():
    """One `ray start --head` for the module (what a user runs on the head node; a start is
    tens of seconds on a busy machine): the CLI tests that can join one (--ray-address) share it,
    the killed batch's resumes and this process's `edges` too; the killed batch's CLI keeps a Ray
    of its own (it checks that Ray goes down with it). 4 CPUs: `edges` holds 2 actors for the
    rest of the module, and a batch that joins must still find room.
    Stopped at the module's end by ending its own process group, never `ray stop` (that takes
    every Ray on the machine, another xdist worker's or another run's too)."""
    port = _free_port()
    env = _env() | {"RAY_USAGE_STATS_ENABLED": "0"} | LOCAL_RAY      # as docs/scale.md's `ray start`
    start = subprocess.Popen([RAY_BIN, "start", "--head", "--port", str(port), "--num-cpus", "4",
                              "--include-dashboard=false", "--disable-usage-stats"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             start_new_session=True)           # its daemons keep this group
    try:
        _, err = start.communicate(timeout=180)
        assert start.returncode == 0, err[-2000:]
        yield {"address": f"127.0.0.1:{port}", "env": env}
    finally:
        # (a TERM gets the raylet's workers; the gcs_server outlived it by 15 s and more: the KILL)
        for sig, wait in ((signal.SIGTERM, 2), (signal.SIGKILL, 30)):
            try:
                os.killpg(start.pid, sig)
            except ProcessLookupError:
                break
            t0 = time.time()
            while _alive(_group(start.pid)) and time.time() - t0 < wait:
                time.sleep(0.2)


@pytest.fixture(scope="module")
def edges(cluster):
    """One warm RayEdges (2 edge actors on the module's cluster, joined from this process) for the
    module's in-process Ray tests: no Ray start of their own and one warm-up instead of one per
    test (each is tens of seconds on a busy machine). A worker a test kills is restarted by Ray
    (up to MAX_RESTARTS times each); the next test's run waits until it answers again."""
    from specdec_core.evaluation.batch.ray_engine import RayEdges

    with pytest.MonkeyPatch.context() as mp:      # RayEdges turns on token mode for a join:
        mp.setenv("RAY_AUTH_MODE", "token")       # not for the processes later tests start
        warm = RayEdges(SPEC, {"A": LONG.to_dict()}, workers=2, address=cluster["address"])
    with warm:
        warm.warm()
        yield warm


def _group(pgid: int) -> set[int]:
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[3]) == pgid:
                    out.add(int(d.name))
            except (OSError, ValueError, IndexError):
                continue
    return out


def jsonl_lines(out: Path) -> list[str]:
    return (out / "results.jsonl").read_text(encoding="utf-8").splitlines()


def keys_of(lines):
    return [(json.loads(ln)["name"], json.loads(ln)["config"]) for ln in lines]


def test_ray_equals_local_on_a_manifest_with_a_broken_clip_and_resume_runs_nothing(tmp_path, cluster):
    """`ray start --head` (what a user runs on the head node: the module's cluster), then
    `batch --ray-address` (the CLI starting a Ray of its own: the killed-batch test): the rows run
    on that cluster's workers, equal to the local engine; a resume runs nothing; and the cluster
    is still up afterwards (the batch leaves it as it was). (One test: the old
    test_joins_a_running_ray_cluster_and_leaves_it_running ran the same batch again.)"""
    manifest = broken_manifest(tmp_path)
    local_out, ray_out = tmp_path / "local", tmp_path / "ray"
    local, ran = run_batch_dir(SPEC, read_manifest(manifest), {"A": CFG}, local_out)
    assert ran == 4
    join = ("--ray-address", cluster["address"])
    p = cli(manifest, "--engine", "ray", *join, "--workers", "2", *KNOBS, "--out", ray_out)
    assert p.returncode == 1, p.stderr[-3000:]          # one clip failed
    assert "Traceback" not in p.stderr
    assert "ran 4 of 4 rows (ray engine)" in p.stdout
    assert "4/4" in p.stderr and "failed=1" in p.stderr   # the progress bar's last state
    rows = json.loads((ray_out / "results.json").read_text(encoding="utf-8"))["rows"]
    assert [r["name"] for r in rows] == ["neutral_03", "angry_01", "bad", "sad_03"]   # manifest order
    assert [r["ok"] for r in rows] == [True, True, False, True]
    for mine, ref in zip(rows, local.rows):
        assert mine["ok"] == ref["ok"] and mine.get("token_ids") == ref.get("token_ids"), mine["name"]
        assert mine["text"] == ref["text"] and mine["error"] == ref["error"]
    bad = rows[2]
    assert not bad["ok"] and "bad.wav" in bad["error"] and "\n" not in bad["error"]
    assert all(r["ok"] and r["token_ids"] for r in rows if r["name"] != "bad")
    lines = jsonl_lines(ray_out)
    assert len(lines) == 4 and sorted(keys_of(lines)) == sorted((n, "A") for n in [*GOOD, "bad"])
    assert len(pd.read_csv(ray_out / "results.csv")) == 4 and (ray_out / "summary.json").is_file()

    before = (ray_out / "results.jsonl").read_bytes()
    mtime = (ray_out / "results.jsonl").stat().st_mtime_ns
    p = cli(manifest, "--engine", "ray", *join, "--workers", "2", *KNOBS, "--out", ray_out, "--resume")
    assert p.returncode == 1, p.stderr[-3000:]
    assert "resume: 4 of 4 rows already in" in p.stderr and "ran 0 of 4 rows" in p.stdout
    assert (ray_out / "results.jsonl").read_bytes() == before
    assert (ray_out / "results.jsonl").stat().st_mtime_ns == mtime          # not even rewritten
    again = json.loads((ray_out / "results.json").read_text(encoding="utf-8"))["rows"]
    assert [r.get("token_ids") for r in again] == [r.get("token_ids") for r in rows]
    status = subprocess.run([RAY_BIN, "status", "--address", cluster["address"]],
                            capture_output=True, text=True, timeout=120,
                            env=cluster["env"] | {"RAY_AUTH_MODE": "token"})    # `ray start` made a token
    assert "CPU" in status.stdout, status.stdout + status.stderr   # still up after the batches


def _descendants(pid: int) -> set[int]:
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            parents[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    out, frontier = set(), {pid}
    while frontier:
        frontier = {c for c, p in parents.items() if p in frontier} - out
        out |= frontier
    return out


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command name (state, ppid, ...; [16] is the niceness)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return [""] * 17


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pids) -> set[int]:
    return {p for p in pids if _stat(p)[0] not in ("", "Z")}


def first_clips(tmp_path: Path, n: int) -> Path:
    """A manifest of the bundled manifest's first `n` clips (copied beside it)."""
    lines = (SAMPLES / "manifest.csv").read_text(encoding="utf-8").splitlines()[: n + 1]
    for line in lines[1:]:
        shutil.copy(SAMPLES / line.split(",")[1], tmp_path / line.split(",")[1])
    path = tmp_path / "manifest.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_killed_batch_loses_nothing_and_resume_completes_it(tmp_path, cluster):
    """SIGKILL the whole CLI (driver of a local Ray) once rows are in results.jsonl: the rows
    it wrote survive, Ray goes away with it (checked by the module's last test), and --resume
    runs exactly the missing rows (on the
    module's cluster: a local Ray start per resume cost minutes on a busy machine and proved no
    more). (On 4 clips x 2 configs and one worker: the bundled 18 clips' 36 rows, then 12 on two
    workers, made it the suite's slowest test and proved no more; the rows run on two workers
    in the other tests.)"""
    out = tmp_path / "out"
    manifest = first_clips(tmp_path, 4)
    args = (manifest, "--engine", "ray", "--workers", "1", "--set", "max_new_tokens=48",
            "--config-b", _config_b(tmp_path), "--out", out)
    join = ("--ray-address", cluster["address"])
    clips = read_manifest(manifest)
    total = 8
    proc = subprocess.Popen([sys.executable, "-m", "specdec_core", "batch", *map(str, args)], cwd=ROOT,
                            env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0, journal = time.time(), out / "results.jsonl"
    while time.time() - t0 < 300 and proc.poll() is None:
        if journal.is_file() and len(journal.read_text(encoding="utf-8").splitlines()) >= 2:
            break
        time.sleep(0.05)
    kids = _descendants(proc.pid)
    # the edges run at nice 0, not Ray's 15 (which starved them on a busy machine)
    actors = {p: _stat(p)[16] for p in kids if _cmdline(p).startswith("ray::EdgeActor")}
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the batch ended before it could be killed"
    killed_at = time.time()
    assert list(actors.values()) == ["0"], actors
    kept = read_rows(journal)
    assert 2 <= len(kept) < total and all(r["ok"] for r in kept.values())
    # a kill in the middle of a write leaves half a line: it must be tolerated and run again
    with open(journal, "a", encoding="utf-8") as f:
        f.write('{"config":"B","name":"%s","ok":true,"text":"cut sh' % clips[-1].name)

    p = cli(*args, *join, "--resume")
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"resume: {len(kept)} of {total} rows already in" in p.stderr
    assert f"ran {total - len(kept)} of {total} rows (ray engine)" in p.stdout
    lines = jsonl_lines(out)
    assert len(lines) == total and len(set(keys_of(lines))) == total       # no duplicates
    rows = json.loads((out / "results.json").read_text(encoding="utf-8"))["rows"]
    assert [(r["name"], r["config"]) for r in rows] == [(c.name, k) for c in clips for k in "AB"]
    assert all(r["ok"] for r in rows)
    # the rows kept from before the kill are the very same rows (not run again)
    for (name, cname), r in kept.items():
        again = next(x for x in rows if x["name"] == name and x["config"] == cname)
        assert again["metrics"]["wall_s"] == r["metrics"]["wall_s"]
    # greedy: k changes the rounds, not the tokens
    by = {(r["name"], r["config"]): r["token_ids"] for r in rows}
    assert all(by[c.name, "A"] == by[c.name, "B"] for c in clips)

    # the journal the resume repaired reads back whole: another resume runs nothing (in this
    # process: no row to run starts no Ray; the CLI's "ran 0 of N" is the first test's)
    configs = {"A": DecodeConfig(max_new_tokens=48), "B": DecodeConfig(k=2, max_new_tokens=48)}
    _, ran = run_batch_dir(SPEC, clips, configs, out, resume=True)
    assert ran == 0 and len(jsonl_lines(out)) == total
    KILLED.append((kids, killed_at))      # Ray going down with it: the module's last test


# (the killed batch's Ray processes, when it was killed)
KILLED: list[tuple[set[int], float]] = []


def _config_b(tmp_path: Path) -> Path:
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"k": 2, "max_new_tokens": 48}), encoding="utf-8")
    return path


def test_a_worker_that_dies_costs_its_row_only(tmp_path, edges):
    """SIGKILL the process of a Ray actor while it decodes a row: one row per death fails with a
    one-line error marked retry, Ray restarts the worker, every other row is ok and equal to the local
    engine's; a resume runs the failed rows only. (On the module's warm `edges`.)"""
    clips = read_manifest(SAMPLES / "manifest.csv")[:8]
    cfg = LONG
    local, _ = run_batch_dir(SPEC, clips, {"A": cfg}, tmp_path / "local")
    want = {r["name"]: r["token_ids"] for r in local.rows}
    killed: list[str] = []

    def on_row(ev):
        if ev["type"] != "progress":
            return
        row = ev["row"]
        if killed and killed[-1] == row["name"]:
            state["waiting"] = False                       # the killed row came back
        if "died" in (row["error"] or ""):
            state["died"] = True
        if state["died"] or state["waiting"] or len(killed) >= 3:
            return
        for a, job in list(edges.in_flight.items()):       # a worker busy with a row
            try:
                os.kill(int(edges.where[a].rsplit(":", 1)[1]), signal.SIGKILL)
            except ProcessLookupError:                      # already dead, not yet noticed
                continue
            killed.append(job[0].name)
            state["waiting"] = True
            return

    state = {"died": False, "waiting": False}
    res, ran = run_batch_dir(SPEC, clips, {"A": cfg}, tmp_path / "ray", engine="ray",
                             edges=edges, on_row=on_row)
    assert ran == 8 and len(res.rows) == 8 and killed
    died = [r for r in res.rows if not r["ok"]]
    assert 1 <= len(died) <= len(killed), [r["error"] for r in died]
    for r in died:      # the row it was running, or (if it had just finished) its next one
        assert r.get("retry") is True
        assert "died" in r["error"] and "\n" not in r["error"]
    for r in res.rows:
        if r["ok"]:
            assert r["token_ids"] == want[r["name"]], r["name"]
    # the restarted worker takes rows again: a second batch on the same actors is all ok
    res2, _ = run_batch_dir(SPEC, clips[:4], {"A": cfg}, tmp_path / "again", engine="ray", edges=edges)
    assert all(r["ok"] for r in res2.rows), [r["error"] for r in res2.rows]
    assert len(jsonl_lines(tmp_path / "ray")) == 8
    res3, ran = run_batch_dir(SPEC, clips, {"A": cfg}, tmp_path / "ray", resume=True)
    assert ran == len(died) and all(r["ok"] for r in res3.rows)
    assert [r["token_ids"] for r in res3.rows] == [want[c.name] for c in clips]
    assert len(jsonl_lines(tmp_path / "ray")) == 8


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


USAGE = [
    (("--engine", "local", "--workers", "2"), "use --engine ray for --workers N"),
    (("--engine", "ray", "--workers", "0"), "--workers must be >= 1"),
    (("--cloud-url", "DEAD1", "DEAD2"), "no cloud server is reachable"),
    (("--engine", "ray", "--ray-address", "127.0.0.1:1"), "cannot reach the Ray cluster at 127.0.0.1:1"),
    (("--engine", "ray", "--ray-address", "nohost"), "--ray-address must be host:port"),
]


@pytest.fixture(scope="module")
def usage(tmp_path_factory):
    """The usage errors' command lines in one CLI process (tests/cli_many.py)."""
    out = tmp_path_factory.mktemp("usage")
    cases = []
    for i, (args, _) in enumerate(USAGE):
        args = [a.replace("DEAD1", f"http://127.0.0.1:{_free_port()}").replace(
            "DEAD2", f"http://127.0.0.1:{_free_port()}") for a in args]
        cases.append(["batch", SAMPLES / "manifest.csv", "--limit", "2", *args, "--out", out / str(i)])
    return run_many(cases, env=_env(), timeout=600)


@pytest.mark.parametrize("i, needle", [(i, needle) for i, (_, needle) in enumerate(USAGE)],
                         ids=[f"args{i}-{needle}" for i, (_, needle) in enumerate(USAGE)])
def test_batch_usage_errors_are_one_line_and_exit_2(usage, i, needle):
    p = usage[i]
    assert p.returncode == 2, p.stderr[-2000:]
    assert len(p.stderr.strip().splitlines()) == 1 and needle in p.stderr, p.stderr


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_cancel_stops_the_batch_and_resume_finishes_it(tmp_path, engine, request):
    """Setting `cancel` after the first row (the Batch tab's Stop button): no further row is
    started, rows in flight are dropped (not journalled half-done), and a resume runs exactly
    the rest, with no duplicate lines."""
    import threading

    clips = read_manifest(SAMPLES / "manifest.csv")[:8]
    cfg = LONG
    cancel = threading.Event()
    seen: list[str] = []

    def on_row(ev):
        if ev["type"] == "progress":
            seen.append(ev["row"]["name"])
            cancel.set()

    workers = 2 if engine == "ray" else None
    warm = request.getfixturevalue("edges") if engine == "ray" else None   # the module's RayEdges
    res, ran = run_batch_dir(SPEC, clips, {"A": cfg}, tmp_path, engine=engine, workers=workers,
                             on_row=on_row, cancel=cancel, edges=warm)
    assert 1 <= len(res.rows) < len(clips) and ran == len(res.rows)
    assert [r["name"] for r in res.rows] == [c.name for c in clips if c.name in seen]
    assert keys_of(jsonl_lines(tmp_path)) == [(n, "A") for n in seen]
    res2, ran2 = run_batch_dir(SPEC, clips, {"A": cfg}, tmp_path, engine="local", resume=True)
    assert ran2 == len(clips) - len(seen)
    assert [r["name"] for r in res2.rows] == [c.name for c in clips] and all(r["ok"] for r in res2.rows)
    assert len(jsonl_lines(tmp_path)) == len(clips)


def test_the_killed_batchs_ray_went_down_with_it():
    """Ray went down with the killed batch's driver (its reaper; the node agents give up on the
    lost raylet ~60 s after the kill, a fixed wait): checked last in the module, so that the
    tests between ran meanwhile instead of a worker sleeping it out."""
    if not KILLED:
        pytest.skip("the killed-batch test did not run in this process")
    kids, killed_at = KILLED[0]
    while _alive(kids) and time.time() - killed_at < 150:
        time.sleep(0.5)
    assert not _alive(kids), f"Ray processes outlived the killed batch: {_alive(kids)}"
