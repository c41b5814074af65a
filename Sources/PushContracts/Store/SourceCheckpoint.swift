import PushCore
import PushJSON

/// Where a source's reading stands: what a restart resumes from.
public struct SourceCheckpoint: Sendable, Equatable {
    /// The source's name: `queue-file`, `socket` (SPEC §11.3).
    public var source: String
    /// The last accepted `seq` (the watermark); `nil` before the first.
    public var lastSeq: Int64?
    /// Bytes of the source consumed (the queue file's offset after the last line read).
    public var position: Int64
    /// Which file `position` is in (`device:inode` of the queue file).
    public var fileIdentity: String?

    public init(source: String, lastSeq: Int64?, position: Int64 = 0, fileIdentity: String? = nil) {
        self.source = source
        self.lastSeq = lastSeq
        self.position = position
        self.fileIdentity = fileIdentity
    }
}
