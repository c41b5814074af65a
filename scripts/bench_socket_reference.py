#!/usr/bin/env python3
"""Reference server for `pushdispatch-bench socket`, driven by the same client in the same run:
a Unix socket server on asyncio that reads change-record lines, parses each (json), applies it
to a dict tree, builds the subscriber's value payload, and commits what is waiting (up to
2,000 lines: the journal rows, the notification rows, the checkpoint) in one SQLite
transaction (WAL, synchronous FULL) before answering {"seq":N,"ok":true} for each line. No
validation, no matching index, no coalescing: a lower bound of the work, to compare with.

    python3 bench_socket_reference.py SOCKET DATABASE
"""
import asyncio
import json
import os
import sqlite3
import sys


def main():
    socket_path, database = sys.argv[1], sys.argv[2]
    db = sqlite3.connect(database, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    db.execute("CREATE TABLE IF NOT EXISTS journal (id INTEGER PRIMARY KEY AUTOINCREMENT, app TEXT, records BLOB)")
    db.execute("CREATE TABLE IF NOT EXISTS notification (id INTEGER PRIMARY KEY AUTOINCREMENT, subscription TEXT, payload BLOB, seq INTEGER)")
    db.execute("CREATE TABLE IF NOT EXISTS checkpoint (source TEXT PRIMARY KEY, seq INTEGER)")
    tree = {}

    def commit(lines):
        notes, answers = [], []
        for line in lines:
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
            answers.append(b'{"seq":%d,"ok":true}\n' % record["seq"])
        db.execute("BEGIN")
        db.execute("INSERT INTO journal (app, records) VALUES (?, ?)", ("bench", b"\n".join(lines)))
        db.executemany("INSERT INTO notification (subscription, payload, seq) VALUES (?, ?, ?)", notes)
        db.execute("INSERT OR REPLACE INTO checkpoint VALUES ('socket', ?)", (notes[-1][2],))
        db.execute("COMMIT")
        return b"".join(answers)

    async def serve(reader, writer):
        buffered = b""
        while True:
            chunk = await reader.read(1 << 20)
            if not chunk:
                break
            buffered += chunk
            *lines, buffered = buffered.split(b"\n")
            for start in range(0, len(lines), 2000):
                writer.write(commit(lines[start:start + 2000]))
            await writer.drain()
        writer.close()
        done.set()  # one client per run: the reference exits when it leaves

    done = asyncio.Event()

    async def run():
        if os.path.exists(socket_path):
            os.remove(socket_path)
        server = await asyncio.start_unix_server(serve, path=socket_path, limit=1 << 24)
        async with server:
            await done.wait()

    asyncio.run(run())


if __name__ == "__main__":
    main()
