#!/usr/bin/env python3
"""Sorts ThreadSanitizer's reports in a log (scripts/sanitizers.sh thread).

On Linux, Swift's `Synchronization.Mutex` locks with a futex that ThreadSanitizer does not see:
two accesses made inside `withLock`, one after the other, are reported as a race although the
lock orders them (scripts/tsan_mutex_demo.swift shows it on this toolchain: a Mutex-guarded
counter is reported, the same with NSLock is not). `withLock` is inlined, so its frame is not in
the stacks; its body is, as a closure taking `inout sending` state (mangled `zYuYT…XEfU_`).

Two kinds of report are counted, not printed:
- "both under a Mutex": the two accesses both run inside such a closure;
- "a Mutex's lock word": one access is an atomic 4-byte one (the futex word's compare-and-swap
  in `withLock`), the other the plain write of `Mutex.init`: the object holding the Mutex was
  handed to another thread through another Mutex, which ThreadSanitizer does not see either.
Every other report is printed in full and makes the exit status 1.

    python3 scripts/tsan_classify.py .sanitizers/tsan.log
"""
import re
import sys

MUTEX_BODY = re.compile(r"zYuYT\w*XEfU\d*_|15Synchronization5MutexV")
LOCK_WORD = re.compile(r"^\s*(Previous )?[Aa]tomic (read|write) of size 4 ", re.M)


def access_stacks(report):
    """The stacks of the report's accesses (the first two sections; not Location/Thread)."""
    stacks, current = [], None
    for line in report.splitlines():
        stripped = line.strip()
        if re.match(r"(Previous )?(Atomic )?(read|write|Read|Write|Modifying access|Previous modifying access|access)\b.* by (thread|main thread)", stripped):
            current = []
            stacks.append(current)
        elif stripped.startswith(("Location is", "Thread T", "Mutex M", "SUMMARY")) or not stripped:
            current = None
        elif current is not None and stripped.startswith("#"):
            current.append(stripped)
    return stacks[:2]


def main(path):
    text = open(path, errors="replace").read()
    reports = text.split("WARNING: ThreadSanitizer:")[1:]
    under_mutex, lock_word, others = 0, 0, []
    for report in reports:
        body = report.split("==================")[0]
        stacks = access_stacks(body)
        if len(stacks) == 2 and all(any(MUTEX_BODY.search(frame) for frame in stack[:6]) for stack in stacks):
            under_mutex += 1
        elif LOCK_WORD.search(body) and re.search(r"Mutex|init|ACycfc", body):
            lock_word += 1
        else:
            others.append("WARNING: ThreadSanitizer:" + body)
    for report in others:
        print(report)
    print(
        f"ThreadSanitizer reports: {len(reports)}; both accesses under a Mutex (not seen by TSan): {under_mutex}; "
        f"a Mutex's lock word: {lock_word}; others: {len(others)}")
    return 1 if others else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
