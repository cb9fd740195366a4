import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))
torch.set_num_threads(1)
# ... and in every process a test starts (CLIs, the app, Ray workers): two torch threads on two
# cores that xdist's two workers (or other work) already keep busy spin against each other
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("SPECSCOPE_STRICT_CODES", "1")   # a check emits only its declared codes

ARTIFACTS = ROOT / "test-artifacts"


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="module")
def page(artifacts, request):
    """One chromium page per test module on the shared app (tests/browser_util.app_page): 1500 x
    1000 unless the module sets PAGE_VIEWPORT; waits default to browser_util.WAIT_MS."""
    pytest.importorskip("playwright.sync_api")
    from browser_util import app_page

    with app_page(getattr(request.module, "PAGE_VIEWPORT", (1500, 1000))) as pg:
        yield pg


@pytest.fixture(scope="session")
def tok():
    from tiny import char_tokenizer

    return char_tokenizer()


@pytest.fixture(autouse=True)
def _one_test_at_a_time_on_shared_servers(request):
    """A test that uses the shared cloud-spec servers (tests/test_audit.py's `servers`, also
    tests/test_served_ab.py's) has them to itself while it runs (cloud_server.use_shared)."""
    if "servers" not in request.fixturenames:
        yield
        return
    from cloud_server import use_shared

    with use_shared("cloud-spec"):
        yield


def pytest_sessionstart(session):
    """The run's controller (or a run without xdist) stops shared servers a killed run left."""
    if not hasattr(session.config, "workerinput"):
        from cloud_server import clean_shared, stop_shared

        stop_shared()
        clean_shared()


_SPANS: dict[tuple[str, str], list[float]] = {}     # (worker, file) -> [first start, last stop]


def pytest_runtest_logreport(report):
    """The controller notes when each worker ran each file (timeline.json beside --junitxml's
    file, read by scripts/test_durations.py --timeline: where a worker waited or ran alone)."""
    worker = getattr(getattr(report, "node", None), "gateway", None)
    key = (worker.id if worker else "main", report.nodeid.split("::")[0])
    span = _SPANS.setdefault(key, [report.start, report.stop])
    span[0], span[1] = min(span[0], report.start), max(span[1], report.stop)


def pytest_sessionfinish(session):
    """... and stops the servers the test files shared (tests/cloud_server.shared_server) once
    every worker is done with them."""
    if hasattr(session.config, "workerinput"):
        return
    xml = session.config.getoption("xmlpath", None)
    if _SPANS and xml:                 # beside the JUnit XML (make test's run, not the range's)
        import json

        t0 = float(os.environ["SPECSCOPE_SUITE_T0"])
        rows = sorted(({"worker": w, "file": f, "start": round(a - t0, 1), "end": round(b - t0, 1)}
                       for (w, f), (a, b) in _SPANS.items()), key=lambda r: (r["worker"], r["start"]))
        (Path(xml).parent / "timeline.json").write_text("[\n" + ",\n".join(map(json.dumps, rows)) + "\n]\n")
    from cloud_server import stop_shared

    for url in stop_shared(os.getpid()):
        print(f"\nstopped the shared cloud server at {url}")


# Test files that take minutes: vLLM servers, Ray clusters, a browser. With `-n 2 --dist loadfile`
# a file runs whole on one worker, and xdist would hand files out most-tests-first, which leaves
# these few-test, many-minute files to the end: one worker then runs them alone while the other
# has nothing left. Handed out longest first instead (xdist's own reordering off).
MINUTES = {"test_remote.py": 4, "test_scale.py": 3, "test_audit.py": 2, "test_served_ab.py": 2}
# ... except the files whose engine `make test` is still building in the background (a fresh
# machine: vLLM's virtualenv, llama-server): the scheduler below hands those out only once their
# build is ready, or when nothing else is left; they wait for it at most until SUITE_BUILD_WAIT_S
# after the suite started (tests/cloud_server.build_wait), then skip saying so.
NEEDS_BUILD = {"test_remote.py": "cloud.sh", "test_audit.py": "cloud.sh", "test_served_ab.py": "cloud.sh",
               "test_audit_llama.py": "llama.sh"}


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):          # pytest-xdist installed
        config.option.loadscopereorder = False
    os.environ.setdefault("SPECSCOPE_SUITE_T0", str(time.time()))   # workers inherit it


def _built(script: str) -> bool:
    return subprocess.run([str(ROOT / "scripts" / "cloud" / script), "ready"],
                          capture_output=True).returncode == 0


_BUILT: dict[str, float] = {}      # script -> when it was last found unbuilt (inf: built)


def _ready_for(scope: str) -> bool:
    """Whether a test file's background build is done (asked at most every 15 s while it is not)."""
    script = NEEDS_BUILD.get(Path(scope.split("::")[0]).name)
    if script is None or _BUILT.get(script) == float("inf"):
        return True
    if time.time() - _BUILT.get(script, 0.0) < 15:
        return False
    _BUILT[script] = float("inf") if _built(script) else time.time()
    return _BUILT[script] == float("inf")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile`, except that a file whose engine is still building is handed to a worker
    only once the build is ready or nothing else is left: on a fresh machine (vLLM's virtualenv:
    minutes) a worker then never sits waiting while other files could run, and once the build is
    done the files go out in the suite's order (the long ones first)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class BuildsWhenReady(LoadFileScheduling):
        def _assign_work_unit(self, node):
            ready = next((sc for sc in self.workqueue if _ready_for(sc)), None)
            if ready is not None:
                self.workqueue.move_to_end(ready, last=False)
            super()._assign_work_unit(node)
    return BuildsWhenReady(config, log)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    count: dict = {}
    for it in items:
        count[it.path] = count.get(it.path, 0) + 1
    browser = {it.path for it in items if it.get_closest_marker("browser")}

    # without xdist (no scheduler to hold them back) an unbuilt engine's files go last
    serial = not hasattr(config, "workerinput") and config.getvalue("dist") in (None, "no")
    unbuilt = {sc for sc in set(NEEDS_BUILD.values()) if serial and not _built(sc)}

    def weight(path):
        if NEEDS_BUILD.get(path.name) in unbuilt:
            return (-1, count[path])
        return (MINUTES.get(path.name, 1 if path in browser else 0), count[path])
    items.sort(key=lambda it: weight(it.path), reverse=True)      # stable: a file's order kept
