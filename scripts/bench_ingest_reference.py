#!/usr/bin/env python3
"""Reference for `pushdispatch-bench ingest`, run in the same invocation on the same records:
the naive pipeline in Python with the standard library's C JSON parser and sqlite3. Each line
is parsed, applied to a dict tree, the subscriber's value payload is serialised (json.dumps),
and the batch (journal rows, notification rows, a checkpoint) is committed in one SQLite
transaction per 2,000 records (WAL, synchronous FULL), as the service does. No validation,
no matching index (the one subscriber is found by its path), no coalescing: a lower bound of
the work, to compare with.

    python3 bench_ingest_reference.py RECORDS.ndjson FOLDER
prints: records seconds
"""
import json
import os
import sqlite3
import sys
import time


def main():
    records_path, folder = sys.argv[1], sys.argv[2]
    with open(records_path, "rb") as f:
        lines = f.read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    db = sqlite3.connect(os.path.join(folder, "reference.db"), isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    db.execute("CREATE TABLE journal (id INTEGER PRIMARY KEY AUTOINCREMENT, app TEXT, records BLOB)")
    db.execute("CREATE TABLE notification (id INTEGER PRIMARY KEY AUTOINCREMENT, subscription TEXT, payload BLOB, seq INTEGER)")
    db.execute("CREATE TABLE checkpoint (source TEXT PRIMARY KEY, seq INTEGER)")
    tree = {}
    start = time.perf_counter()
    for offset in range(0, len(lines), 2000):
        batch = lines[offset:offset + 2000]
        notes = []
        for line in batch:
            record = json.loads(line)
            node = tree
            keys = [k for k in record["path"].split("/") if k]
            for key in keys[:-1]:
                node = node.setdefault(key, {})
            node[keys[-1]] = record["data"]
            payload = json.dumps({"s": "OK", "t": "value", "app": record["app"], "sp": record["path"],
                                  "d": json.dumps(record["data"], separators=(",", ":"), ensure_ascii=False)},
                                 separators=(",", ":"), ensure_ascii=False)
            notes.append((record["path"], payload.encode(), record["seq"]))
        db.execute("BEGIN")
        db.execute("INSERT INTO journal (app, records) VALUES (?, ?)", ("bench", b"\n".join(batch)))
        db.executemany("INSERT INTO notification (subscription, payload, seq) VALUES (?, ?, ?)", notes)
        db.execute("INSERT OR REPLACE INTO checkpoint VALUES ('bench', ?)", (notes[-1][2],))
        db.execute("COMMIT")
    print(len(lines), time.perf_counter() - start)


if __name__ == "__main__":
    main()
