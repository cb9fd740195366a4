"""Seconds per test file from a pytest JUnit XML (make test writes test-artifacts/junit.xml):
where the suite's time goes, slowest first, with the share of the total, and the run's wall
time against the floor no schedule beats on --workers workers (a file runs whole on one worker
under --dist loadfile): max(sum / workers, the longest file).

    python scripts/test_durations.py test-artifacts/junit.xml [--top 25] [--workers 2]
        [--timeline test-artifacts/timeline.json]

--timeline (tests/conftest.py writes it): each worker's busy time, the seconds it sat idle
between files (waiting for a file to be handed out) and at the end, its last files, and when
each file that needs a built engine started.
"""
from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from collections import defaultdict


def per_file(path: str) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("classname", "").split(".")
        out["/".join(name[: name.index(next(n for n in name if n.startswith("test_")), 0) + 1]) + ".py"] \
            += float(case.get("time") or 0)
    return dict(out)


def timeline(path: str, needs: tuple = ("test_remote.py", "test_audit.py", "test_served_ab.py",
                                        "test_audit_llama.py")) -> None:
    rows = json.loads(open(path, encoding="utf-8").read())
    end = max(r["end"] for r in rows)
    for w in sorted({r["worker"] for r in rows}):
        mine = [r for r in rows if r["worker"] == w]
        busy = sum(r["end"] - r["start"] for r in mine)
        gaps = sum(max(0.0, b["start"] - a["end"]) for a, b in zip(mine, mine[1:]))
        last = ", ".join(f"{r['file'].split('/')[-1]} {r['start']:.0f}-{r['end']:.0f}" for r in mine[-3:])
        print(f"{w}: {len(mine)} files, busy {busy:.0f} s, idle between files {gaps:.0f} s, "
              f"done at {mine[-1]['end']:.0f} s of {end:.0f} s; last: {last}")
    for r in rows:
        if r["file"].split("/")[-1] in needs:
            print(f"  {r['file']} on {r['worker']}: {r['start']:.0f}-{r['end']:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("junit")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeline", help="test-artifacts/timeline.json (tests/conftest.py)")
    a = ap.parse_args()
    files = per_file(a.junit)
    total = sum(files.values()) or 1.0
    wall = sum(float(s.get("time") or 0) for s in ET.parse(a.junit).getroot().iter("testsuite"))
    floor = max(total / max(a.workers, 1), max(files.values(), default=0.0))
    print(f"test time per file (sum over workers: {total:.0f} s; wall {wall:.0f} s; "
          f"floor on {a.workers} workers {floor:.0f} s)")
    for f, s in sorted(files.items(), key=lambda kv: -kv[1])[: a.top]:
        print(f"{s:8.1f} s {100 * s / total:5.1f} %  {f}")
    if a.timeline:
        timeline(a.timeline)


if __name__ == "__main__":
    main()
