import PushCore
import PushJSON

/// Why a store operation failed. Callers (the REST API, the index follower, ingestion) act on
/// its ``kind``, never on message text; the context says which subscription, application or
/// constraint, for people.
public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The kinds of failure: compare with the static members (`error.kind == .busy`).
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        private enum Code: Sendable, Hashable { case constraint, duplicate, busy, changeLogPruned, corrupt, unavailable, leaseLost }
        private let code: Code

        /// A schema invariant refused the write (NOT NULL, CHECK, UNIQUE other than the
        /// subscription's identity, a trigger); ``StoreError/detail`` names the constraint.
        public static let constraint = Kind(code: .constraint)
        /// Another subscription already has this id.
        public static let duplicate = Kind(code: .duplicate)
        /// The database stayed locked by another writer beyond the busy timeout: try again.
        public static let busy = Kind(code: .busy)
        /// The change log was pruned past the requested position (``StoreError/prunedThrough``):
        /// changes were lost to the reader, which must reload from the table.
        public static let changeLogPruned = Kind(code: .changeLogPruned)
        /// Stored data cannot be read back (a row breaks what the code expects).
        public static let corrupt = Kind(code: .corrupt)
        /// The database cannot be opened, read or written (I/O, permissions, disk full).
        public static let unavailable = Kind(code: .unavailable)
        /// The commit was made under an application's lease (``StoreError/app``) that this
        /// instance no longer holds (it expired and another instance took the application over):
        /// nothing was written.
        public static let leaseLost = Kind(code: .leaseLost)

        public var description: String {
            switch code {
            case .constraint: "constraint"
            case .duplicate: "duplicate"
            case .busy: "busy"
            case .changeLogPruned: "changeLogPruned"
            case .corrupt: "corrupt"
            case .unavailable: "unavailable"
            case .leaseLost: "leaseLost"
            }
        }
    }

    public let kind: Kind
    /// What the store or the database said (the constraint, what cannot be read, why it is
    /// unavailable), without secrets.
    public let detail: String?
    /// The subscription concerned, when there is one.
    public let subscriptionID: String?
    /// The application concerned (``Kind/leaseLost``).
    public let app: String?
    /// How far the change log was pruned (``Kind/changeLogPruned``).
    public let prunedThrough: Int64?

    private init(_ kind: Kind, detail: String? = nil, subscriptionID: String? = nil, app: String? = nil, prunedThrough: Int64? = nil) {
        self.kind = kind
        self.detail = detail
        self.subscriptionID = subscriptionID
        self.app = app
        self.prunedThrough = prunedThrough
    }

    public static func constraint(_ constraint: String, subscriptionID: String? = nil) -> StoreError {
        StoreError(.constraint, detail: constraint, subscriptionID: subscriptionID)
    }

    public static func duplicate(subscriptionID: String?) -> StoreError {
        StoreError(.duplicate, subscriptionID: subscriptionID)
    }

    public static func busy(subscriptionID: String? = nil) -> StoreError {
        StoreError(.busy, subscriptionID: subscriptionID)
    }

    public static func changeLogPruned(through: Int64) -> StoreError {
        StoreError(.changeLogPruned, prunedThrough: through)
    }

    public static func corrupt(_ what: String, subscriptionID: String? = nil) -> StoreError {
        StoreError(.corrupt, detail: what, subscriptionID: subscriptionID)
    }

    public static func unavailable(_ why: String, subscriptionID: String? = nil) -> StoreError {
        StoreError(.unavailable, detail: why, subscriptionID: subscriptionID)
    }

    public static func leaseLost(app: String) -> StoreError {
        StoreError(.leaseLost, app: app)
    }

    /// Equal when of the same kind: the context is for people.
    public static func == (lhs: StoreError, rhs: StoreError) -> Bool { lhs.kind == rhs.kind }

    public var description: String {
        let subject = subscriptionID.map { " (subscription \($0))" } ?? ""
        let detail = self.detail ?? ""
        switch kind {
        case .constraint: return "the store refused the write\(subject): \(detail)"
        case .duplicate: return "a subscription with this id exists already\(subject)"
        case .busy: return "the store is busy (locked by another writer)\(subject); try again"
        case .changeLogPruned: return "the subscription change log was pruned through \(prunedThrough ?? 0)"
        case .corrupt: return "stored data cannot be read\(subject): \(detail)"
        case .leaseLost: return "the lease on application \(app ?? "?") was lost to another instance; the batch was not committed"
        default: return "the store is unavailable: \(detail)"
        }
    }
}
