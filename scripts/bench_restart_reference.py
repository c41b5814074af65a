#!/usr/bin/env python3
"""Reference for `pushdispatch-bench restart`, run in the same invocation on the same snapshot:
Python's json.loads (C parser) of the tree, and the resident memory the result holds.

    python3 bench_restart_reference.py SNAPSHOT.json
prints: seconds resident_bytes
"""
import sys
import time


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def main():
    with open(sys.argv[1], "rb") as f:
        data = f.read()
    import json
    before = rss()
    start = time.perf_counter()
    tree = json.loads(data)
    seconds = time.perf_counter() - start
    print(seconds, rss() - before)
    return tree


if __name__ == "__main__":
    main()
