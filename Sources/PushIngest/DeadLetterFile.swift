import Logging
import Synchronization
import PushCore
import PushContracts

#if canImport(Glibc)
import Glibc
#endif

/// The dead-letter file: rejected lines are appended, and made durable before the batch that
/// rejected them commits, so a rejected line is never silently lost (after a crash it may be
/// written twice).
///
/// Every line in the file is a whole JSON object: a write that fails midway (a full disk, an
/// I/O error) is cut back to the size the file had before it, and a file found not ending with
/// a newline when it is opened (a crash mid-write, or a cut that failed) is cut back to its
/// last newline, so that the retried batch starts a line of its own. What is cut was never
/// acknowledged: its batch did not commit and is written again.
///
/// The file is bounded: an append that would take it past `maxSize` first renames it to
/// ``rotatedPath`` (replacing an older one) and starts a new file, so at most about twice the
/// bound is on disk. A batch larger than the bound by itself is written all the same, alone in a
/// new file: a rejected line is never dropped.
public final class DeadLetterFile: DeadLetterSink, @unchecked Sendable {
    // @unchecked Sendable: the mutable state below is touched by `append` alone, under
    // `serial` (several tasks append to one file: a shared instance's intake and owner).
    public let path: String
    /// The size past which the file is rotated, in bytes.
    public let maxSize: Int
    /// `ingest.deadLetterMaxSize`'s default: 1 GiB.
    public static let defaultMaxSize = 1 << 30

    public var location: String { path }
    /// Where the previous file goes when the file rotates: `path` followed by `.1`.
    public var rotatedPath: String { path + ".1" }

    private let logger: Logger
    /// One append at a time.
    private let serial = Mutex(())
    private var descriptor: Int32 = -1
    /// Whether the open file is a regular file (not, say, `/dev/null`): only a regular file is
    /// measured, cut back and rotated.
    private var regular = true
    /// The size of the file when every line in it was whole, as of the last write.
    private var wholeSize = 0
    /// A failed write could not be cut back: bytes past `wholeSize` may be a partial line.
    private var tornTail = false

    public init(path: String, maxSize: Int = DeadLetterFile.defaultMaxSize, logger: Logger) {
        self.path = path
        self.maxSize = max(1, maxSize)
        self.logger = logger
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }

    /// Appends entries and flushes them to disk. On failure the file holds what it held before
    /// (or, if even cutting it back failed, it is cut back before the next write), so the caller
    /// may simply call again with the same entries.
    public func append(_ letters: [DeadLetter]) throws {
        guard !letters.isEmpty else { return }
        try serial.withLock { _ throws in try appendAlone(letters) }
    }

    private func appendAlone(_ letters: [DeadLetter]) throws {
        var bytes: [UInt8] = []
        for letter in letters { bytes += letter.json }
        if descriptor < 0 { try openFile() }
        if regular {
            if tornTail { try cutTornTail() }
            let size = try currentSize()
            // Past the bound? (The subtraction cannot overflow: both are at least 0.)
            if size > 0 && bytes.count > maxSize - size { try rotate(size: size) }
            wholeSize = try currentSize()
        }
        do {
            try writeAll(bytes)
            if fsync(descriptor) != 0 {
                throw IngestError.deadLetterFile(path, "cannot flush \(bytes.count) bytes written at byte \(wholeSize)", errno: errno)
            }
        } catch let error as IngestError {
            guard regular else { throw error }
            if ftruncate(descriptor, off_t(wholeSize)) != 0 {
                let code = errno
                tornTail = true
                throw IngestError.deadLetterFile(
                    path,
                    "\(error.detail); cutting it back to the \(wholeSize) whole bytes before the write failed too "
                        + "(\(String(cString: strerror(code)))); it is cut back before the next write")
            }
            throw error
        }
        if regular { wholeSize += bytes.count }
    }

    private func writeAll(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                throw IngestError.deadLetterFile(
                    path, "cannot write \(bytes.count) bytes at byte \(wholeSize) (\(offset) written)", errno: errno)
            }
            offset += written
        }
    }

    /// Opens (or creates, mode 0600: its lines hold applications' data, as the database does)
    /// the file, cuts a partial last line, and makes the file's name durable (a new file's lines
    /// would be lost with its directory entry). A file that an earlier version created for its
    /// group too (0640) is made the owner's alone.
    private func openFile() throws {
        let opened = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard opened >= 0 else { throw IngestError.deadLetterFile(path, "cannot open it for appending", errno: errno) }
        var status = stat()
        guard fstat(opened, &status) == 0 else {
            let code = errno
            close(opened)
            throw IngestError.deadLetterFile(path, "cannot read its size after opening it", errno: code)
        }
        if (status.st_mode & S_IFMT) == S_IFREG, status.st_mode & 0o077 != 0 {
            guard fchmod(opened, 0o600) == 0 else {
                let code = errno
                close(opened)
                throw IngestError.deadLetterFile(
                    path, "is readable by its group or others and holds applications' data; run: chmod 600 \(path)", errno: code)
            }
        }
        descriptor = opened
        regular = (status.st_mode & S_IFMT) == S_IFREG
        tornTail = false
        guard regular else { return }
        do {
            try cutToLastNewline(size: Int(status.st_size))
            try syncDirectory()
        } catch {
            close(opened)
            descriptor = -1
            throw error
        }
    }

    /// Cuts the file back to its last newline when it does not end with one: the tail is part
    /// of a line whose write did not finish.
    private func cutToLastNewline(size: Int) throws {
        guard size > 0 else { return }
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        var end = size
        var keep = 0
        scan: while end > 0 {
            let start = max(0, end - chunk.count)
            let count = end - start
            let read = chunk.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress!, count, off_t(start)) }
            guard read == count else {
                let code = read < 0 ? errno : EIO
                throw IngestError.deadLetterFile(path, "cannot read bytes \(start) to \(end) to check that its last line is whole", errno: code)
            }
            if end == size && chunk[count - 1] == UInt8(ascii: "\n") { return }
            for index in stride(from: count - 1, through: 0, by: -1) where chunk[index] == UInt8(ascii: "\n") {
                keep = start + index + 1
                break scan
            }
            end = start
        }
        guard ftruncate(descriptor, off_t(keep)) == 0, fsync(descriptor) == 0 else {
            throw IngestError.deadLetterFile(
                path, "cannot cut its partial last line (bytes \(keep) to \(size)) to leave whole lines only", errno: errno)
        }
        logger.warning(
            "the dead-letter file ended with a partial line (a write that did not finish); it was cut back to its last whole line",
            metadata: ["file": "\(path)", "bytesCut": "\(size - keep)", "bytesKept": "\(keep)"])
    }

    /// Cuts what a failed write left past `wholeSize`. A file shorter than that was changed by
    /// someone else: it is cut back to its last newline instead (growing it would add zeros).
    private func cutTornTail() throws {
        let size = try currentSize()
        if size > wholeSize {
            guard ftruncate(descriptor, off_t(wholeSize)) == 0 else {
                throw IngestError.deadLetterFile(
                    path, "cannot cut back bytes \(wholeSize) to \(size) that a failed write left (a partial line)", errno: errno)
            }
        } else if size < wholeSize {
            try cutToLastNewline(size: size)
        }
        tornTail = false
    }

    /// Renames the file to ``rotatedPath`` (replacing an older one) and opens a new one.
    private func rotate(size: Int) throws {
        guard fsync(descriptor) == 0 else {
            throw IngestError.deadLetterFile(path, "cannot flush it before rotating it", errno: errno)
        }
        var older = stat()
        let replacing = stat(rotatedPath, &older) == 0
        guard rename(path, rotatedPath) == 0 else {
            throw IngestError.deadLetterFile(path, "cannot rename it to \(rotatedPath) to rotate it", errno: errno)
        }
        close(descriptor)
        descriptor = -1
        let message: Logger.Message =
            replacing
            ? "the dead-letter file reached its size bound and was rotated: its lines are in the rotated file, and a new file is started; the older rotated file was replaced, its lines are gone"
            : "the dead-letter file reached its size bound and was rotated: its lines are in the rotated file, and a new file is started"
        logger.warning(
            message,
            metadata: [
                "file": "\(path)", "rotatedTo": "\(rotatedPath)", "rotatedBytes": "\(size)", "maxSize": "\(maxSize)",
                "replacedBytes": "\(replacing ? Int(older.st_size) : 0)",
            ])
        try openFile()
    }

    private func currentSize() throws -> Int {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw IngestError.deadLetterFile(path, "cannot read its size", errno: errno)
        }
        return Int(status.st_size)
    }

    /// Flushes the folder, so that the file's name (a new file, a rotation) survives a crash.
    private func syncDirectory() throws {
        let folder = path.utf8.lastIndex(of: UInt8(ascii: "/")).map { index in
            index == path.utf8.startIndex ? "/" : String(path[..<index])
        } ?? "."
        let handle = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard handle >= 0 else {
            throw IngestError.deadLetterFile(path, "cannot open its folder \(folder) to flush it", errno: errno)
        }
        defer { close(handle) }
        guard fsync(handle) == 0 else {
            throw IngestError.deadLetterFile(path, "cannot flush its folder \(folder)", errno: errno)
        }
    }
}
