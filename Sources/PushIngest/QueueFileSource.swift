import Logging
import PushCore
import PushContracts
import ServiceLifecycle

/// Tails the queue file (SPEC §4) into the ingest queue, as a `Service`.
public struct QueueFileSource: Service {
    public static let name = "queue-file"

    public let path: String
    public let queue: IngestQueue
    /// Where the last committed batch left this source.
    public let checkpoint: SourceCheckpoint?
    /// How long to wait when the file has nothing new, where the file's changes cannot be
    /// watched (``FileChangeWatch``: inotify on Linux, where the file is looked at again every
    /// ``watchFallback`` whatever happens, and at once when it changes).
    public let pollInterval: Duration
    /// With a watch: how often the file is looked at anyway.
    public let watchFallback: Duration
    /// With a watch, while the path names another file than the one being read: how often the
    /// reader looks (it switches after a few quiet reads).
    static let rotationPoll = Duration.milliseconds(50)
    public let maxLineBytes: Int
    public let logger: Logger
    /// Told once the source follows its file.
    public let readiness: any SourceReadiness

    public init(
        path: String, queue: IngestQueue, checkpoint: SourceCheckpoint?, pollInterval: Duration = .milliseconds(50), watchFallback: Duration = .seconds(1),
        maxLineBytes: Int = 16 << 20, readiness: any SourceReadiness = NoReadiness(), logger: Logger
    ) {
        self.watchFallback = watchFallback
        self.readiness = readiness
        self.path = path
        self.queue = queue
        self.checkpoint = checkpoint
        self.pollInterval = pollInterval
        self.maxLineBytes = maxLineBytes
        self.logger = logger
    }

    /// A checkpoint's file as stored: `device:inode@fingerprint` (the fingerprint of the bytes
    /// before the offset; older checkpoints have none).
    static func storedIdentity(_ line: QueueFileReader.Line) -> String { line.fileIdentity + "@" + line.fingerprint }

    static func parseStoredIdentity(_ stored: String) -> (identity: String, fingerprint: String?) {
        guard let at = stored.firstIndex(of: "@") else { return (stored, nil) }
        return (String(stored[..<at]), String(stored[stored.index(after: at)...]))
    }

    public func run() async throws {
        let stored = checkpoint.flatMap { checkpoint in checkpoint.fileIdentity.map { (Self.parseStoredIdentity($0), checkpoint.position) } }
        var reader = QueueFileReader(
            path: path, checkpoint: stored.map { ($0.0.identity, $0.1) }, fingerprint: stored?.0.fingerprint, maxLineBytes: maxLineBytes)
        defer { reader.close() }
        let watch = FileChangeWatch(path: path, fallback: watchFallback)
        defer { watch?.stop() }
        if watch == nil { logger.info("the queue file's changes cannot be watched: it is looked at every \(pollInterval)", metadata: ["path": "\(path)"]) }
        var announcedMissing = false
        var attached = false
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            let lines = try reader.read()
            let events = reader.takeEvents()
            for event in events { log(event) }
            // Attached (ready) while the file is followed or simply not there yet; a file that is
            // there and cannot be opened keeps readiness down, with the reason.
            if !attached && reader.problem == nil {
                readiness.attached(Self.name)
                attached = true
            }
            // Read on at once: a file just opened (at start, or the new one of a rotation), whose
            // bytes may all have come before the change that was signalled; or bytes read and no
            // line yet, a line longer than a read's budget that goes on, already in the file.
            if lines.isEmpty && (reader.lastReadSawData || events.contains(where: \.startsAFile)) { continue }
            if lines.isEmpty {
                let atPath = QueueFileReader.identity(ofPath: path)
                if reader.problem == nil && atPath == nil && reader.checkpoint == nil && !announcedMissing {
                    logger.info("waiting for the queue file to appear", metadata: ["path": "\(path)"])
                    announcedMissing = true
                }
                // The path names another file (or none) than the one being read: the reader
                // switches after a few quiet reads (the writer may still finish the old one), so
                // it looks again soon rather than waiting for a change.
                let following = reader.checkpoint?.identity
                let rotating = following != nil && following != atPath
                do {
                    if let watch, !rotating {
                        await cancelWhenGracefulShutdown { await watch.next() }
                        if Task.isShuttingDownGracefully || Task.isCancelled { return }
                    } else {
                        let interval = watch == nil ? pollInterval : min(pollInterval, Self.rotationPoll)
                        try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
                    }
                } catch {
                    return
                }
                continue
            }
            for line in lines {
                let sent = await queue.send(
                    IngestLine(
                        bytes: line.bytes, source: Self.name, position: line.position, resumePosition: line.end,
                        fileIdentity: Self.storedIdentity(line), overflow: line.overflow))
                if !sent { return }
            }
        }
    }

    func log(_ event: QueueFileReader.Event) {
        switch event {
        case .opened(let identity, let offset):
            logger.info("reading the queue file", metadata: ["path": "\(path)", "file": "\(identity)", "offset": "\(offset)"])
        case .rotated(let old, let new):
            logger.info("the queue file was rotated; the old one is finished", metadata: ["path": "\(path)", "from": "\(old)", "to": "\(new)"])
        case .truncated(let identity, let offset):
            logger.warning("the queue file was truncated; reading it again from its start", metadata: ["file": "\(identity)", "at": "\(offset)"])
        case .rewritten(let identity, let offset):
            logger.warning(
                "the queue file's bytes before the checkpoint changed (truncated and written again); reading it again from its start",
                metadata: ["path": "\(path)", "file": "\(identity)", "at": "\(offset)"])
        case .unreadable(let reason):
            readiness.failing(Self.name, reason: reason.map { "\(path): \($0)" })
            if let reason {
                logger.error("the queue file cannot be read; retrying until it can", metadata: ["path": "\(path)", "reason": "\(reason)"])
            } else {
                logger.notice("the queue file can be read again", metadata: ["path": "\(path)"])
            }
        case .checkpointedFileGone(let identity):
            logger.warning(
                "the checkpointed queue file is gone; reading the current one from its start",
                metadata: ["path": "\(path)", "checkpointed": "\(identity)"])
        }
    }
}

extension QueueFileReader.Event {
    /// The reader now reads a file from a new place (opened, rotated to, read again from its
    /// start): what it holds is read without waiting for another change.
    var startsAFile: Bool {
        switch self {
        case .opened, .rotated, .truncated, .rewritten, .checkpointedFileGone: true
        case .unreadable: false
        }
    }
}
