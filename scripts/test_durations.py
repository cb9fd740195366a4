"""Seconds per test file from a pytest JUnit XML (make test writes test-artifacts/junit.xml):
where the suite's time goes, slowest first, with the share of the total.

    python scripts/test_durations.py test-artifacts/junit.xml [--top 25]
"""
from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from collections import defaultdict


def per_file(path: str) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("classname", "").split(".")
        out["/".join(name[: name.index(next(n for n in name if n.startswith("test_")), 0) + 1]) + ".py"] \
            += float(case.get("time") or 0)
    return dict(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("junit")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    files = per_file(a.junit)
    total = sum(files.values()) or 1.0
    print(f"test time per file (sum over workers: {total:.0f} s)")
    for f, s in sorted(files.items(), key=lambda kv: -kv[1])[: a.top]:
        print(f"{s:8.1f} s {100 * s / total:5.1f} %  {f}")


if __name__ == "__main__":
    main()
