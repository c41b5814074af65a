#if canImport(Glibc)
import Glibc
#endif

/// The start-up's code pages let go once the service runs (issue 35).
///
/// Starting touches code it never runs again (configuration, migrations, TLS set-up, the
/// router), and the kernel maps 64 KiB around each page it faults in: idle, the process held
/// ~46 MB of clean code pages of its binary and libraries for ~7 MB of its own memory.
/// `trim()` asks the kernel to unmap the resident pages of every read-only executable file
/// mapping (`MADV_DONTNEED`). They stay in the page cache, shared, and come back on their next
/// use; only the resident set shrinks to what the running service uses. What this does not
/// do: free memory the kernel had not already been free to reclaim (clean file pages), or
/// change what a container's memory cgroup is charged for the page cache.
///
/// Only mappings that are executable, not writable, backed by a file and without a private
/// dirty page are touched: a page the loader relocated (or a debugger patched) is never
/// dropped, since reading it back from the file would lose that change.
enum CodePages {
    /// Drops the resident pages of the read-only executable file mappings; the bytes that were
    /// resident in them (0 where `/proc/self/smaps` cannot be read).
    static func trim() -> Int {
        #if os(Linux)
        guard let text = procFile("/proc/self/smaps") else { return 0 }
        var dropped = 0
        for mapping in mappings(smaps: text) where mapping.droppable {
            if madvise(UnsafeMutableRawPointer(bitPattern: mapping.start), Int(mapping.end - mapping.start), Int32(MADV_DONTNEED)) == 0 {
                dropped += mapping.resident
            }
        }
        return dropped
        #else
        return 0
        #endif
    }

    /// A `/proc` file read to its end. (Foundation's `String(contentsOfFile:)` reads a file
    /// of `/proc`, whose size says 0, in one read: `smaps` comes back cut after ~4 KB.)
    static func procFile(_ path: String) -> String? {
        #if os(Linux)
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += chunk[0..<count]
            // A process maps a few thousand regions at most; past 64 MiB this is not smaps.
            if bytes.count > 64 << 20 { return nil }
        }
        return String(decoding: bytes, as: UTF8.self)
        #else
        return nil
        #endif
    }

    struct Mapping: Equatable {
        var start: UInt
        var end: UInt
        var permissions: Substring
        var path: Substring
        var resident = 0
        var privateDirty = 0

        /// Read-only, executable, of a file, resident, never written.
        var droppable: Bool {
            permissions.hasPrefix("r-x") && path.hasPrefix("/") && resident > 0 && privateDirty == 0 && end > start
        }
    }

    /// The mappings of a `/proc/PID/smaps` text: each header line
    /// (`start-end perms offset dev inode [path]`) with its `Rss:` and `Private_Dirty:`.
    static func mappings(smaps: String) -> [Mapping] {
        var result: [Mapping] = []
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard let first = fields.first else { continue }
            if first.hasSuffix(":") {
                guard !result.isEmpty, fields.count >= 2, let kilobytes = Int(fields[1]), kilobytes >= 0, kilobytes < Int.max / 1024 else { continue }
                if first == "Rss:" { result[result.count - 1].resident = kilobytes * 1024 }
                if first == "Private_Dirty:" { result[result.count - 1].privateDirty = kilobytes * 1024 }
                continue
            }
            let bounds = first.split(separator: "-")
            guard bounds.count == 2, fields.count >= 5, let start = UInt(bounds[0], radix: 16), let end = UInt(bounds[1], radix: 16) else { continue }
            result.append(Mapping(start: start, end: end, permissions: fields[1], path: fields.count > 5 ? fields[5] : ""))
        }
        return result
    }
}
