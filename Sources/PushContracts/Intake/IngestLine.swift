import PushCore
import PushJSON
import Synchronization

/// One line read by a source, with what the pipeline needs to checkpoint and answer it.
public struct IngestLine: Sendable {
    /// The line, without its newline (cut to the limit when ``overflow`` is set).
    public let bytes: [UInt8]
    /// `queue-file` or `socket` (SPEC §11.3).
    public let source: String
    /// Where the line starts in its source (queue file: byte offset; socket: line number in its
    /// connection), for the dead-letter file.
    public let position: Int64
    /// Queue file: the offset after the line (what a checkpoint records).
    public let resumePosition: Int64
    /// Queue file: `device:inode` of the file the line was read from.
    public let fileIdentity: String?
    /// The line was longer than the limit: `bytes` holds its beginning, `overflow` its length.
    public let overflow: Int?
    /// Socket: where the answer goes.
    public let ack: IngestAck?

    public init(
        bytes: [UInt8], source: String, position: Int64, resumePosition: Int64 = 0, fileIdentity: String? = nil, overflow: Int? = nil,
        ack: IngestAck? = nil
    ) {
        self.bytes = bytes
        self.source = source
        self.position = position
        self.resumePosition = resumePosition
        self.fileIdentity = fileIdentity
        self.overflow = overflow
        self.ack = ack
    }
}
