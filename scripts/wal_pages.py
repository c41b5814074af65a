#!/usr/bin/env python3
"""The pages a SQLite writer wrote, by table and index: the frames of a WAL from a given frame on.

Usage: scripts/wal_pages.py DB WAL [FIRST_FRAME]
       scripts/wal_pages.py --frames WAL   (the number of valid, committed frames)

DB and WAL are copies (copy the WAL first, then the database, while a reader holds a snapshot:
scripts/writer-pages.sh does it). Each frame is attributed twice:

- by what the frame itself holds: a table's leaf page names its table by its rows' column count
  (the first cell's record header), when that count is one table's alone; an index leaf or an
  interior page by the same means where it can; else "table leaf (n columns)" and the like;
- by what owns that page number in the copy (SQLite's `dbstat`), which is wrong for a page that
  was freed and reused within the window (a settled notification's page now holding attempts).

The first is the one to read; the second is printed for comparison.
"""
import collections
import sqlite3
import struct
import sys


def varint(buffer, offset):
    """SQLite's big-endian varint at offset: (value, next offset)."""
    value = 0
    for index in range(9):
        byte = buffer[offset + index]
        if index == 8:
            return (value << 8) | byte, offset + 9
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, offset + index + 1
    return value, offset + 9


def record_columns(page, cell, skip_rowid):
    """The number of columns of the record in the cell at `cell` (None when unreadable)."""
    try:
        _, offset = varint(page, cell)  # payload size
        if skip_rowid:
            _, offset = varint(page, offset)
        header_size, position = varint(page, offset)
        end = offset + header_size
        columns = 0
        while position < end:
            _, position = varint(page, position)
            columns += 1
        return columns
    except IndexError:
        return None


def frame_kind(page, number, tables, indexes):
    """What the frame's content says it is."""
    start = 100 if number == 1 else 0
    kind = page[start]
    cells = struct.unpack(">H", page[start + 3:start + 5])[0]
    if kind not in (0x02, 0x05, 0x0A, 0x0D):
        return "not a b-tree page (overflow, freelist)"
    if kind == 0x05:
        return "table interior"
    if cells == 0:
        return {0x02: "index interior", 0x0A: "index leaf", 0x0D: "table leaf"}[kind] + " (empty)"
    header = 12 if kind == 0x02 else 8
    cell = struct.unpack(">H", page[start + header:start + header + 2])[0]
    if kind == 0x0D:
        columns = record_columns(page, cell, skip_rowid=True)
        names = tables.get(columns, [])
        return names[0] if len(names) == 1 else f"table leaf ({columns} columns: {', '.join(names) or '?'})"
    columns = record_columns(page, cell + (4 if kind == 0x02 else 0), skip_rowid=False)
    names = indexes.get(columns, [])
    label = "index" if kind == 0x0A else "index interior"
    return names[0] if len(names) == 1 else f"{label} ({columns} columns: {', '.join(names) or '?'})"


def read_frames(wal, keep_from):
    """The WAL's valid frames (those of its current salt): (page number, commit size, content
    from frame `keep_from` on, else None)."""
    with open(wal, "rb") as file:
        header = file.read(32)
        if len(header) < 32:
            sys.exit(f"{wal}: not a WAL (shorter than its 32-byte header)")
        magic, _, page_size, _, salt1, salt2, _, _ = struct.unpack(">8I", header)
        if magic not in (0x377F0682, 0x377F0683):
            sys.exit(f"{wal}: not a WAL (magic {magic:#x})")
        frames = []
        while True:
            frame_header = file.read(24)
            page = file.read(page_size)
            if len(frame_header) < 24 or len(page) < page_size:
                break
            number, commit, frame_salt1, frame_salt2 = struct.unpack(">4I", frame_header[:16])
            if (frame_salt1, frame_salt2) != (salt1, salt2):
                break
            frames.append((number, commit, page if keep_from is not None and len(frames) >= keep_from else None))
    # A transaction's frames count once its commit frame is there.
    while frames and not frames[-1][1]:
        frames.pop()
    return frames


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--frames":
        print(len(read_frames(sys.argv[2], keep_from=None)))
        return
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    database, wal = sys.argv[1], sys.argv[2]
    first = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    # The frames first: opening the copy may checkpoint it into the database.
    frames = read_frames(wal, keep_from=first)
    connection = sqlite3.connect(database)
    tables = collections.defaultdict(list)
    indexes = collections.defaultdict(list)
    for name, kind, table in connection.execute("SELECT name, type, tbl_name FROM sqlite_schema WHERE type IN ('table', 'index')"):
        if kind == "table":
            columns = len(connection.execute(f'PRAGMA table_info("{name}")').fetchall())
            without_rowid = "WITHOUT ROWID" in (connection.execute("SELECT upper(sql) FROM sqlite_schema WHERE name = ?", (name,)).fetchone()[0] or "")
            (indexes if without_rowid else tables)[columns].append(name)
        else:
            # An index's record: its key columns (expressions too), then the table's key (the
            # rowid, or a WITHOUT ROWID table's primary key columns not in it): index_xinfo's rows.
            indexes[len(connection.execute(f'PRAGMA index_xinfo("{name}")').fetchall())].append(name)
    owner = {page: name for name, page in connection.execute("SELECT name, pageno FROM dbstat")}
    window = frames[first:]
    if not window:
        sys.exit(f"no frames from frame {first} (the WAL has {len(frames)})")
    def attribute(number, page):
        kind = frame_kind(page, number, tables, indexes)
        # Several tables or indexes with as many columns: the page's owner now, when it is one
        # of them (the content says which kind of b-tree it was).
        if "columns: " in kind and owner.get(number) and owner[number] in kind.split("columns: ")[1].rstrip(")").split(", "):
            return owner[number]
        return kind

    by_content = collections.Counter(attribute(number, page) for number, _, page in window)
    by_owner = collections.Counter(owner.get(number, "free now") for number, _, _ in window)
    commits = sum(1 for _, commit, _ in window if commit)
    print(f"WAL: {len(frames)} frames; from frame {first}: {len(window)} frames, {commits} commits, {len(window) / max(commits, 1):.1f} frames a commit")
    print("by what each frame holds:")
    for name, count in by_content.most_common(20):
        print(f"  {count:9d} {100 * count / len(window):5.1f} %  {name}")
    print("by what owns the page now (dbstat on the copy):")
    for name, count in by_owner.most_common(12):
        print(f"  {count:9d} {100 * count / len(window):5.1f} %  {name}")


if __name__ == "__main__":
    main()
