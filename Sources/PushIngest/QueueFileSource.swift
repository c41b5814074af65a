import Logging
import PushCore
import ServiceLifecycle

/// Tails the queue file (SPEC §4) into the ingest queue, as a `Service`.
public struct QueueFileSource: Service {
    public static let name = "queue-file"

    public let path: String
    public let queue: IngestQueue
    /// Where the last committed batch left this source.
    public let checkpoint: SourceCheckpoint?
    /// How long to wait when the file has nothing new.
    public let pollInterval: Duration
    public let maxLineBytes: Int
    public let logger: Logger
    /// Told once the source follows its file.
    public let readiness: any SourceReadiness

    public init(
        path: String, queue: IngestQueue, checkpoint: SourceCheckpoint?, pollInterval: Duration = .milliseconds(50),
        maxLineBytes: Int = 16 << 20, readiness: any SourceReadiness = NoReadiness(), logger: Logger
    ) {
        self.readiness = readiness
        self.path = path
        self.queue = queue
        self.checkpoint = checkpoint
        self.pollInterval = pollInterval
        self.maxLineBytes = maxLineBytes
        self.logger = logger
    }

    public func run() async throws {
        let resume = checkpoint.flatMap { checkpoint in checkpoint.fileIdentity.map { ($0, checkpoint.position) } }
        var reader = QueueFileReader(path: path, checkpoint: resume, maxLineBytes: maxLineBytes)
        defer { reader.close() }
        readiness.attached(Self.name)
        var announcedMissing = false
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            let lines = try reader.read()
            for event in reader.takeEvents() { log(event) }
            if lines.isEmpty {
                if QueueFileReader.identity(ofPath: path) == nil && reader.checkpoint == nil && !announcedMissing {
                    logger.info("waiting for the queue file to appear", metadata: ["path": "\(path)"])
                    announcedMissing = true
                }
                do {
                    try await cancelWhenGracefulShutdown { try await Task.sleep(for: pollInterval) }
                } catch {
                    return
                }
                continue
            }
            for line in lines {
                let sent = await queue.send(
                    IngestLine(
                        bytes: line.bytes, source: Self.name, position: line.position, resumePosition: line.end,
                        fileIdentity: line.fileIdentity, overflow: line.overflow))
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
        case .checkpointedFileGone(let identity):
            logger.warning(
                "the checkpointed queue file is gone; reading the current one from its start",
                metadata: ["path": "\(path)", "checkpointed": "\(identity)"])
        }
    }
}
