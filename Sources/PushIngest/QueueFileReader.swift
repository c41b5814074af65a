import PushCore

#if canImport(Glibc)
import Glibc
#endif

/// Reads the lines a database appends to a queue file (SPEC §4 "Queue file"), following the
/// file as it grows, is rotated or is truncated.
///
/// - A partial last line waits until its newline arrives.
/// - Rotation (the path renamed and a new file created there): the old file is read to its end
///   first. A writer may still append to the renamed file for a moment, so it is left only once
///   it has stopped growing for ``rotationGrace`` reads; a partial last line in it is then a
///   line of its own.
/// - Truncation in place (copy-truncate): reading starts again at the beginning. A file that
///   was truncated and written past the offset again between two reads (or while the service
///   was stopped) is told by its fingerprint: the ``fingerprintBytes`` before the offset are
///   not the ones read there; it is read again from its start too, never from the middle of a
///   line.
/// - Resuming: a checkpoint names the file (`device:inode`), the offset and the fingerprint of
///   the bytes before it. The file at the path is resumed at that offset when it is the same
///   file with the same bytes; when the path now holds another file, the checkpointed one is
///   looked for beside it (rotated away), finished, and the new one read from its start.
///
/// Synchronous and without timers: ``QueueFileSource`` calls ``read()`` in a loop and sleeps
/// when it returns nothing.
public struct QueueFileReader {
    public struct Line: Sendable, Equatable {
        public var bytes: [UInt8]
        /// Offset of the line's first byte.
        public var position: Int64
        /// Offset after the line (and its newline).
        public var end: Int64
        public var fileIdentity: String
        /// The line was longer than the limit: its length (``bytes`` holds its beginning).
        public var overflow: Int?
        /// The fingerprint of the file's bytes before ``end`` (what a checkpoint at ``end``
        /// keeps, to tell a rewritten file on resuming).
        public var fingerprint: String
    }

    /// Bytes before an offset that its fingerprint covers.
    public static let fingerprintBytes = 64

    /// Something worth a log line: a rotation, a truncation, a checkpointed file not found.
    public enum Event: Sendable, Equatable {
        case opened(identity: String, offset: Int64)
        case rotated(from: String, to: String)
        case truncated(identity: String, at: Int64)
        /// The bytes before the offset are not the ones read there: the file was truncated and
        /// written again past the offset.
        case rewritten(identity: String, at: Int64)
        case checkpointedFileGone(identity: String)
        /// The file at the path cannot be opened or read (`nil`: it can again).
        case unreadable(reason: String?)
    }

    public let path: String
    public let maxLineBytes: Int
    /// Reads without growth after which a rotated-away file is left.
    public let rotationGrace: Int

    private var descriptor: Int32 = -1
    private var identity = ""
    /// Offset of the next byte to read from `descriptor`.
    private var offset: Int64 = 0
    /// Bytes of the current (partial) line; they start at `offset - pending.count`.
    private var pending: [UInt8] = []
    /// The current line is too long: its length so far (its first bytes are in `pending`).
    private var overflowLength: Int?
    /// The path now holds another file: reads of the current one that found nothing new.
    private var quietReads = 0
    /// A file to read after the current one is finished (resuming from a rotated checkpoint).
    private var resumeNextAtStart = false
    /// The last bytes read before `offset` (at most ``fingerprintBytes``): they must still be
    /// there at the next read.
    private var recent: [UInt8] = []
    /// Why the file at the path cannot be opened, while it cannot.
    public private(set) var problem: String?
    public private(set) var events: [Event] = []

    /// Starts reading `path`, resuming after `checkpoint` (identity and offset; `fingerprint`,
    /// when the checkpoint has one, of the bytes before the offset) when given.
    public init(
        path: String, checkpoint: (identity: String, offset: Int64)? = nil, fingerprint: String? = nil, maxLineBytes: Int = 16 << 20,
        rotationGrace: Int = 20
    ) {
        self.path = path
        self.maxLineBytes = maxLineBytes
        self.rotationGrace = rotationGrace
        if let checkpoint {
            // The path is opened only if the file it names is the checkpoint's (checked on the
            // opened descriptor: the path may be rotated between a `stat` and the `open`).
            if Self.identity(ofPath: path) == checkpoint.identity,
                open(path, expecting: checkpoint.identity, at: checkpoint.offset, fingerprint: fingerprint) || problem != nil
            {
                // The same file, at the checkpoint's offset; or it cannot be opened (the problem
                // says why, and it is read from its start once it can be, as before).
            } else if let rotated = Self.find(identity: checkpoint.identity, near: path),
                open(rotated, expecting: checkpoint.identity, at: checkpoint.offset, fingerprint: fingerprint)
            {
                resumeNextAtStart = true
            } else {
                events.append(.checkpointedFileGone(identity: checkpoint.identity))
            }
        }
    }

    /// Whether the last ``read(budget:)`` read bytes (a line longer than its budget is read over
    /// several calls, each returning no line until its end).
    public private(set) var lastReadSawData = false

    /// Takes the events noted since the last call.
    public mutating func takeEvents() -> [Event] {
        defer { events = [] }
        return events
    }

    /// The complete lines available now (at most about `budget` bytes of them); empty when there
    /// is nothing new.
    public mutating func read(budget: Int = 4 << 20) throws -> [Line] {
        lastReadSawData = false
        if descriptor < 0 {
            guard identityOrProblem() != nil else { return [] }  // not there yet, or not readable
            guard open(path, expecting: nil, at: 0, fingerprint: nil) else { return [] }
        }
        var lines: [Line] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        var readBytes = 0
        var sawData = false
        // Truncated in place, or truncated and written again past the offset: start again at
        // the beginning.
        var status = stat()
        let shorter = fstat(descriptor, &status) == 0 && Int64(status.st_size) < offset
        if shorter || !recentStillThere() {
            if !pending.isEmpty || overflowLength != nil { lines.append(flushPending()) }
            events.append(shorter ? .truncated(identity: identity, at: offset) : .rewritten(identity: identity, at: offset))
            offset = 0
            pending = []
            overflowLength = nil
            recent = []
            lseek(descriptor, 0, SEEK_SET)
        }
        while readBytes < budget {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                // Opened without blocking: a file that honours it (a mandatory lock, a special
                // file system) has nothing for now.
                if errno == EAGAIN || errno == EWOULDBLOCK { break }
                throw IngestError.queueFile(path, "cannot read it", errno: errno)
            }
            if count == 0 { break }
            sawData = true
            readBytes += count
            split(chunk[0..<count], into: &lines)
        }
        lastReadSawData = sawData
        if sawData {
            quietReads = 0
            return lines
        }
        // At the end of the file: has the path moved on to another file?
        let current = Self.identity(ofPath: path)
        if current != identity || resumeNextAtStart {
            quietReads += 1
            if quietReads >= rotationGrace || resumeNextAtStart {
                if !pending.isEmpty || overflowLength != nil { lines.append(flushPending()) }
                let old = identity
                Glibc.close(descriptor)
                descriptor = -1
                resumeNextAtStart = false
                quietReads = 0
                if current != nil, open(path, expecting: nil, at: 0, fingerprint: nil) {
                    events.append(.rotated(from: old, to: identity))
                }
            }
        }
        return lines
    }

    /// Where a restart would resume: the file and the offset after the last complete line.
    public var checkpoint: (identity: String, offset: Int64)? {
        descriptor < 0 ? nil : (identity, offset - Int64(pending.count) - Int64(overflowLength.map { $0 - pending.count } ?? 0))
    }

    public mutating func close() {
        if descriptor >= 0 { Glibc.close(descriptor) }
        descriptor = -1
    }

    // MARK: - Helpers

    private mutating func split(_ bytes: ArraySlice<UInt8>, into lines: inout [Line]) {
        var start = bytes.startIndex
        while let newline = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) {
            append(bytes[start..<newline])
            remember(bytes[start...newline])
            offset += Int64(newline - start + 1)
            let length = overflowLength ?? pending.count
            let end = offset
            let position = end - Int64(length) - 1
            lines.append(
                Line(bytes: pending, position: position, end: end, fileIdentity: identity, overflow: overflowLength, fingerprint: Self.fingerprint(recent)))
            pending = []
            overflowLength = nil
            start = newline + 1
        }
        append(bytes[start...])
        remember(bytes[start...])
        offset += Int64(bytes.endIndex - start)
    }

    /// Keeps the last ``fingerprintBytes`` bytes read.
    private mutating func remember(_ bytes: ArraySlice<UInt8>) {
        let keep = Self.fingerprintBytes
        if bytes.count >= keep {
            recent = Array(bytes.suffix(keep))
        } else {
            recent.append(contentsOf: bytes)
            if recent.count > keep { recent.removeFirst(recent.count - keep) }
        }
    }

    /// Whether the bytes read last are still before the offset (one `pread` of at most
    /// ``fingerprintBytes``).
    private func recentStillThere() -> Bool {
        guard !recent.isEmpty, offset >= Int64(recent.count) else { return true }
        return bytes(before: offset, count: recent.count) == recent
    }

    /// The `count` bytes of the open file before `end` (fewer when it is shorter).
    private func bytes(before end: Int64, count: Int) -> [UInt8] {
        let start = max(0, end - Int64(count))
        var buffer = [UInt8](repeating: 0, count: Int(end - start))
        var filled = 0
        while filled < buffer.count {
            let got = buffer.withUnsafeMutableBytes { raw in
                pread(descriptor, raw.baseAddress! + filled, raw.count - filled, off_t(start) + off_t(filled))
            }
            if got < 0 && errno == EINTR { continue }
            if got <= 0 { break }
            filled += got
        }
        return Array(buffer.prefix(filled))
    }

    /// A short text naming `bytes` (FNV-1a 64, in hex): what a checkpoint keeps of the bytes
    /// before its offset.
    public static func fingerprint(_ bytes: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// Adds bytes to the current line, keeping at most `maxLineBytes` of it.
    private mutating func append(_ bytes: ArraySlice<UInt8>) {
        if let length = overflowLength {
            overflowLength = length + bytes.count
            return
        }
        if pending.count + bytes.count > maxLineBytes {
            let room = maxLineBytes - pending.count
            overflowLength = pending.count + bytes.count
            pending += bytes.prefix(max(0, min(room, 64 << 10)))
            if pending.count > 64 << 10 { pending = Array(pending.prefix(64 << 10)) }
            return
        }
        pending += bytes
    }

    /// The partial line, as a line of its own (its file ended without a newline).
    private mutating func flushPending() -> Line {
        let length = overflowLength ?? pending.count
        let line = Line(
            bytes: pending, position: offset - Int64(length), end: offset, fileIdentity: identity, overflow: overflowLength,
            fingerprint: Self.fingerprint(recent))
        pending = []
        overflowLength = nil
        return line
    }

    /// Opens `file` at `start`; with a `fingerprint`, only if the bytes before `start` are the
    /// ones it names (else from the beginning, said as an event). The identity read is the
    /// opened descriptor's, never the path's: a rotation between a look at the path and the
    /// `open` would otherwise give the file another's identity (and it would be read again
    /// from its start once that one was seen rotated). With `expecting`, a file of another
    /// identity is closed again, and the answer is `false`.
    ///
    /// Opened without blocking: a FIFO put at the path after its `stat` would otherwise hold
    /// the reader (and the thread it runs on) in `open` until someone wrote to it. (A regular
    /// file's reads ignore the flag.)
    @discardableResult
    mutating func open(_ file: String, expecting: String?, at start: Int64, fingerprint: String?) -> Bool {
        let fd = Glibc.open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            setProblem("cannot open it: \(String(cString: strerror(errno)))")
            return false
        }
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            setProblem("cannot read what it is: \(String(cString: strerror(errno)))")
            Glibc.close(fd)
            return false
        }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            Glibc.close(fd)
            setProblem("it is not a regular file")
            return false
        }
        let identity = Self.identity(of: status)
        if let expecting, identity != expecting {
            Glibc.close(fd)
            return false
        }
        setProblem(nil)
        descriptor = fd
        self.identity = identity
        pending = []
        overflowLength = nil
        var position = start
        if start > Int64(status.st_size) {
            // A checkpoint beyond the end: the file was truncated meanwhile; start again.
            events.append(.truncated(identity: identity, at: start))
            position = 0
        }
        recent = position > 0 ? bytes(before: position, count: Self.fingerprintBytes) : []
        if position > 0, let fingerprint, Self.fingerprint(recent) != fingerprint {
            events.append(.rewritten(identity: identity, at: position))
            position = 0
            recent = []
        }
        lseek(fd, off_t(position), SEEK_SET)
        offset = position
        events.append(.opened(identity: identity, offset: position))
        return true
    }

    /// The identity of the file at the path, or `nil` when there is none yet or it cannot be
    /// read (then ``problem`` says why).
    private mutating func identityOrProblem() -> String? {
        var status = stat()
        guard stat(path, &status) == 0 else {
            if errno == ENOENT {
                setProblem(nil)
            } else {
                setProblem("cannot reach it: \(String(cString: strerror(errno)))")
            }
            return nil
        }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            setProblem("it is not a regular file")
            return nil
        }
        return Self.identity(of: status)
    }

    private mutating func setProblem(_ reason: String?) {
        guard reason != problem else { return }
        problem = reason
        events.append(.unreadable(reason: reason))
    }

    /// `device:inode` of a file's status.
    static func identity(of status: stat) -> String {
        "\(status.st_dev):\(status.st_ino)"
    }

    /// `device:inode` of the file at `path`, or `nil` when there is none.
    public static func identity(ofPath path: String) -> String? {
        var status = stat()
        guard stat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Self.identity(of: status)
    }

    /// A file with this identity in the folder of `path` (where rotation leaves files).
    static func find(identity: String, near path: String) -> String? {
        let folder = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let directory = folder.isEmpty ? "." : folder
        guard let handle = opendir(directory) else { return nil }
        defer { closedir(handle) }
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name == "." || name == ".." { continue }
            let candidate = directory + "/" + name
            if Self.identity(ofPath: candidate) == identity { return candidate }
        }
        return nil
    }
}
