"""scripts/test_durations.py: where a run's time went, from the JUnit XML and the timeline that
tests/conftest.py writes (which worker ran which file, and when)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

JUNIT = """<testsuites><testsuite name="pytest" time="100.0">
<testcase classname="tests.test_a" name="t1" time="60.0"/>
<testcase classname="tests.test_a" name="t2" time="20.0"/>
<testcase classname="tests.test_b" name="t1" time="50.0"/>
<testcase classname="tests.sub.test_c" name="t1" time="10.0"/>
</testsuite></testsuites>"""
TIMELINE = [{"worker": "gw0", "file": "tests/test_a.py", "start": 5.0, "end": 85.0},
            {"worker": "gw1", "file": "tests/test_b.py", "start": 5.0, "end": 55.0},
            {"worker": "gw1", "file": "tests/test_remote.py", "start": 70.0, "end": 80.0},
            {"worker": "gw1", "file": "tests/sub/test_c.py", "start": 80.0, "end": 90.0}]


def test_per_file_floor_and_timeline(tmp_path):
    (tmp_path / "junit.xml").write_text(JUNIT)
    (tmp_path / "timeline.json").write_text(json.dumps(TIMELINE))
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "test_durations.py"), str(tmp_path / "junit.xml"),
                        "--timeline", str(tmp_path / "timeline.json")], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "test time per file (sum over workers: 140 s; wall 100 s; floor on 2 workers 80 s)"
    assert lines[1].split() == ["80.0", "s", "57.1", "%", "tests/test_a.py"]
    assert lines[3].split()[-1] == "tests/sub/test_c.py"
    assert lines[4] == ("gw0: 1 files, busy 80 s, idle between files 0 s, done at 85 s of 90 s; "
                        "last: test_a.py 5-85")
    assert lines[5] == ("gw1: 3 files, busy 70 s, idle between files 15 s, done at 90 s of 90 s; "
                        "last: test_b.py 5-55, test_remote.py 70-80, test_c.py 80-90")
    assert lines[6].strip() == "tests/test_remote.py on gw1: 70-80 s"
