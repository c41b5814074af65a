import PushCore

#if canImport(Glibc)
import Glibc
#endif

/// The dead-letter file: rejected lines are appended, and made durable before the batch that
/// rejected them commits, so a rejected line is never silently lost (after a crash it may be
/// written twice).
public final class DeadLetterFile: DeadLetterSink, @unchecked Sendable {
    // @unchecked Sendable: only the pipeline's single task writes to it.
    public let path: String

    public var location: String { path }
    private var descriptor: Int32 = -1

    public init(path: String) {
        self.path = path
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }

    /// Appends entries and flushes them to disk.
    public func append(_ letters: [DeadLetter]) throws {
        guard !letters.isEmpty else { return }
        if descriptor < 0 {
            descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o640)
            guard descriptor >= 0 else {
                throw IngestError.deadLetterFile(path, "cannot open it", errno: errno)
            }
        }
        var bytes: [UInt8] = []
        for letter in letters { bytes += letter.json }
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                throw IngestError.deadLetterFile(path, "cannot write it", errno: errno)
            }
            offset += written
        }
        if fsync(descriptor) != 0 {
            throw IngestError.deadLetterFile(path, "cannot flush it", errno: errno)
        }
    }
}

