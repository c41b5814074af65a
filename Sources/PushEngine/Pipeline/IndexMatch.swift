import PushCore
import PushJSON

/// A subscription the index found for a write: its store handle, mode and path.
public struct IndexMatch: Sendable, Hashable {
    public let handle: Int64
    public let mode: Mode
    public let path: Path

    public init(handle: Int64, mode: Mode, path: Path) {
        self.handle = handle
        self.mode = mode
        self.path = path
    }
}
