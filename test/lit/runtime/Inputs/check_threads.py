#!/usr/bin/env python3
"""check_threads.py STATS.json EXPECTED: the "threads" helm-rt ran with (--stats-json) against
EXPECTED, "cores" (the CPUs this process may run on, its affinity mask) or a number. Prints
"threads ok" or the mismatch (exit 1)."""
import json
import os
import sys


def main(path: str, expected: str) -> int:
    with open(path) as f:
        threads = json.load(f).get("threads")
    want = len(os.sched_getaffinity(0)) if expected == "cores" else int(expected)
    if threads != want:
        print(f"threads bad: {threads!r}, expected {want} ({expected})")
        return 1
    print("threads ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
