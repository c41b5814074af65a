import Foundation
import Synchronization

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Where the offline queue is kept between launches of the app: one document (a few hundred
/// bytes per operation), replaced whole each time the queue changes.
///
/// ``FileOperationQueueStore`` keeps it in a file readable by its owner only. An app may keep
/// it elsewhere (a database it already has, an App Group container): implement these two
/// functions. They are called from the queue's actor one at a time, never concurrently, and
/// synchronously, so that an operation is stored before the call that queued it returns;
/// `save` must replace the document atomically (all of the new one, or all of the old).
public protocol OperationQueueStore: Sendable {
    /// The stored document, or `nil` when there is none yet.
    func loadQueue() throws -> Data?
    /// Stores `document`, replacing the stored one.
    func saveQueue(_ document: Data) throws
}

/// Keeps the offline queue in one file, readable and writable by its owner only (mode 0600, in
/// a folder of mode 0700 when this store creates it). Each save writes a temporary file beside
/// it, flushes it to disk, and renames it over the old one.
public struct FileOperationQueueStore: OperationQueueStore {
    /// The queue's file.
    public let fileURL: URL

    /// A store for the queue at `fileURL`.
    public init(fileURL: URL) {
        self.fileURL = fileURL
    }

    /// The default file of an application's queue: `PushDispatchClient/queue-<app>.json` in the
    /// user's application support folder, beside the default device key.
    public static func standard(app: String) -> FileOperationQueueStore {
        let keyFile = FileDeviceKeyStore.standard(app: app).fileURL
        return FileOperationQueueStore(
            fileURL: keyFile.deletingLastPathComponent().appendingPathComponent("queue-\(FileDeviceKeyStore.fileName(app)).json"))
    }

    /// The file's contents; `nil` when there is no file.
    public func loadQueue() throws -> Data? {
        // Not through a link, never blocking on a FIFO, a regular file only, and no more read
        // than a queue may hold.
        let descriptor = open(fileURL.path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            throw PushClientError(.queueStore, "the offline queue's file \(Bounded.quoted(fileURL.path)) cannot be opened (errno \(errno)): a link, or unreadable")
        }
        defer { close(descriptor) }
        var information = stat()
        guard fstat(descriptor, &information) == 0, (information.st_mode & S_IFMT) == S_IFREG else {
            throw PushClientError(.queueStore, "the offline queue's file \(Bounded.quoted(fileURL.path)) is not a regular file")
        }
        guard information.st_size <= QueueDocument.maxBytes else {
            throw PushClientError(.queueStore, "the offline queue's file has \(information.st_size) bytes, more than \(QueueDocument.maxBytes)")
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw PushClientError(.queueStore, "the offline queue's file could not be read (errno \(errno))")
            }
            if count == 0 { break }
            bytes += chunk[..<count]
            guard bytes.count <= QueueDocument.maxBytes else {
                throw PushClientError(.queueStore, "the offline queue's file has more than \(QueueDocument.maxBytes) bytes")
            }
        }
        return Data(bytes)
    }

    /// Takes the file's lock (`<file>.lock`, mode 0600), or says who holds it: one queue per
    /// file, in this process and across processes (an app and its extension).
    func lockExclusively() throws(PushClientError) -> FileLock {
        let folder = fileURL.deletingLastPathComponent()
        if !FileManager.default.fileExists(atPath: folder.path) {
            do {
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw PushClientError(.queueStore, "the offline queue's folder could not be made: \(Bounded.text(String(describing: error), limit: 200))")
            }
        }
        let path = fileURL.path + ".lock"
        let descriptor = open(path, O_RDWR | O_CREAT, 0o600)
        guard descriptor >= 0 else {
            throw PushClientError(.queueStore, "the offline queue's lock file \(Bounded.quoted(path)) could not be opened (errno \(errno))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            throw PushClientError(
                .queueStore,
                "the offline queue's file \(Bounded.quoted(fileURL.path)) is in use by another PushDispatch object or process: "
                    + "one queue file serves one PushDispatch at a time")
        }
        return FileLock(descriptor: descriptor)
    }

    /// Writes `document` to the file (mode 0600), atomically and durably.
    public func saveQueue(_ document: Data) throws {
        try FileDeviceKeyStore.replace(fileURL, with: document)
    }
}

/// An offline queue kept in memory only: operations wait for the network while the process
/// lives, and are lost with it. What ``OfflineQueueConfiguration`` uses unless persistence is
/// enabled, as Firebase keeps its write queue in memory unless `isPersistenceEnabled`.
public final class InMemoryOperationQueueStore: OperationQueueStore {
    private let document = Mutex<Data?>(nil)

    /// An empty store.
    public init() {}

    /// The document saved last, if any.
    public func loadQueue() -> Data? { document.withLock { $0 } }

    /// Keeps `document`.
    public func saveQueue(_ document: Data) { self.document.withLock { $0 = document } }
}

/// An exclusive lock on a queue file (`flock` on `<file>.lock`), released when the queue that
/// holds it ends: two queues on one file would each write their own copy over the other's.
final class FileLock: Sendable {
    let descriptor: Int32

    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    deinit {
        close(descriptor)
    }
}
