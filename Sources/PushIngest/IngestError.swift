#if canImport(Glibc)
import Glibc
#endif

/// A source cannot go on: which file or socket, what failed, and the system's reason.
public struct IngestError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure: compare with the static members.
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        private enum Code: Sendable, Hashable { case queueFile, socket, deadLetterFile }
        private let code: Code

        /// The queue file cannot be read.
        public static let queueFile = Kind(code: .queueFile)
        /// The Unix socket cannot be listened on.
        public static let socket = Kind(code: .socket)
        /// The dead-letter file cannot be opened, written or flushed.
        public static let deadLetterFile = Kind(code: .deadLetterFile)

        public var description: String {
            switch code {
            case .queueFile: "queue file"
            case .socket: "socket"
            case .deadLetterFile: "dead-letter file"
            }
        }
    }

    public let kind: Kind
    /// The file or socket concerned.
    public let path: String
    /// What failed, with the system's reason.
    public let detail: String

    public var description: String { "the \(kind) \(path): \(detail)" }

    /// Equal when of the same kind (the context is for people).
    public static func == (lhs: IngestError, rhs: IngestError) -> Bool { lhs.kind == rhs.kind }

    static func queueFile(_ path: String, _ what: String, errno code: Int32) -> IngestError {
        IngestError(kind: .queueFile, path: path, detail: "\(what): \(String(cString: strerror(code)))")
    }

    static func socket(_ path: String, _ what: String) -> IngestError {
        IngestError(kind: .socket, path: path, detail: what)
    }

    static func deadLetterFile(_ path: String, _ what: String, errno code: Int32) -> IngestError {
        IngestError(kind: .deadLetterFile, path: path, detail: "\(what): \(String(cString: strerror(code)))")
    }

    static func deadLetterFile(_ path: String, _ detail: String) -> IngestError {
        IngestError(kind: .deadLetterFile, path: path, detail: detail)
    }
}
