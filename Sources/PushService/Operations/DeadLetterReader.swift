import Foundation
import PushAPI
import PushContracts
import PushJSON

/// Reads the dead-letter file (and the one it rotated to) for the operations API
/// (`GET /ops/v1/deadletter`): one entry at a time, oldest first, a line at most as long as the
/// longest record accepted plus its envelope held at once. Each instance reads its own file.
struct DeadLetterReader {
    let path: String

    /// The rotated file first (older), then the current one.
    var files: [String] { [path + ".1", path] }

    /// The entries matching `filter`, from `cursor` (an entry's index, exclusive) on, at most
    /// `limit`; the next cursor when more match.
    func page(_ filter: DeadLetterFilter, cursor: Int64?, limit: Int) throws -> HistoryPage<DeadLetterEntry> {
        var items: [DeadLetterEntry] = []
        let more = try each(filter, cursor: cursor) { entry, _ in
            guard items.count < limit else { return false }
            items.append(entry)
            return true
        }
        return HistoryPage(items: items, nextCursor: more ? items.last?.index : nil)
    }

    /// Calls `body` with each entry matching `filter` after `cursor`, and the line it holds
    /// (whole, as the file keeps it), in order, while it returns true; whether it stopped early.
    func each(_ filter: DeadLetterFilter, cursor: Int64? = nil, _ body: (DeadLetterEntry, [UInt8]) throws -> Bool) throws -> Bool {
        var more = false
        var index: Int64 = -1
        for file in files where FileManager.default.fileExists(atPath: file) {
            guard let handle = FileHandle(forReadingAtPath: file) else { throw StatusError("cannot read the dead-letter file \(file)") }
            defer { try? handle.close() }
            var buffer: [UInt8] = []
            var reachedEnd = false
            while !reachedEnd && !more {
                let chunk = try handle.read(upToCount: 1 << 20) ?? Data()
                if chunk.isEmpty { reachedEnd = true } else { buffer += chunk }
                var start = 0
                while let newline = buffer[start...].firstIndex(of: UInt8(ascii: "\n")) ?? (reachedEnd && start < buffer.count ? buffer.count : nil) {
                    let line = Array(buffer[start..<newline])
                    start = min(buffer.count, newline + 1)
                    guard !line.isEmpty else { continue }
                    index += 1
                    if let cursor, index <= cursor { continue }
                    guard let (entry, text) = Self.letter(line, index: index), Self.matches(entry, filter) else { continue }
                    if try !body(entry, Array(text.utf8)) {
                        more = true
                        break
                    }
                }
                buffer.removeFirst(start)
            }
            if more { break }
        }
        return more
    }

    static func matches(_ entry: DeadLetterEntry, _ filter: DeadLetterFilter) -> Bool {
        if let reason = filter.reason, !entry.reason.contains(reason) { return false }
        if let app = filter.app, entry.app != app { return false }
        if let since = filter.since, entry.timestamp < since { return false }
        if let until = filter.until, entry.timestamp >= until { return false }
        return true
    }

    /// An entry of the file's line `bytes`, and the refused line (`nil`: not one the service
    /// wrote).
    static func letter(_ bytes: [UInt8], index: Int64) -> (DeadLetterEntry, String)? {
        guard let letter = try? JSONParser.parse(bytes), let line = letter["line"]?.stringValue else { return nil }
        let record = try? JSONParser.parse(Array(line.utf8))
        let digest = OperationsAPI.redacted(line)["sha256"]?.stringValue ?? ""
        let entry = DeadLetterEntry(
            index: index, timestamp: letter["ts"]?.integerValue ?? 0, source: letter["source"]?.stringValue ?? "",
            position: letter["position"]?.integerValue ?? 0, reason: letter["reason"]?.stringValue ?? "", app: record?["app"]?.stringValue,
            seq: record?["seq"]?.integerValue, bytes: line.utf8.count, sha256: digest, head: String(line.prefix(DeadLetterEntry.headCharacters)))
        return (entry, line)
    }

    /// A queue-file line refused as too long was kept only up to the limit then in force: the
    /// whole line, read again from the queue file at its position when the file still holds
    /// it there (it begins with what was kept); `nil` otherwise.
    /// Only a regular file is read, opened without blocking: a FIFO at the path would hold the
    /// thread in `open` and `read`.
    static func wholeLine(queueFile: String, position: Int64, kept: [UInt8], limit: Int) -> [UInt8]? {
        guard position >= 0 else { return nil }
        let descriptor = open(queueFile, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { return nil }
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else {
            close(descriptor)
            return nil
        }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        defer { try? handle.close() }
        do {
            try handle.seek(toOffset: UInt64(position))
            var line: [UInt8] = []
            while line.count <= limit {
                guard let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty else { break }
                if let newline = chunk.firstIndex(of: UInt8(ascii: "\n")) {
                    line += chunk[chunk.startIndex..<newline]
                    return line.starts(with: kept) && line.count <= limit ? line : nil
                }
                line += chunk
            }
        } catch {}
        return nil
    }
}
