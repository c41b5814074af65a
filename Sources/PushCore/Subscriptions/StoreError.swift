/// Why a store operation failed, typed so that callers (the REST API, the index follower) act
/// on the kind of failure rather than on message text.
public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// A schema invariant refused the write (NOT NULL, CHECK, UNIQUE other than the
        /// subscription's identity, a trigger); the payload names the constraint.
        case constraint(String)
        /// Another subscription already has this id.
        case duplicate
        /// The database stayed locked by another writer beyond the busy timeout: try again.
        case busy
        /// The change log was pruned past the requested position: changes were lost to the
        /// reader, which must reload from the table.
        case changeLogPruned(through: Int64)
        /// Stored data cannot be read back (a row breaks what the code expects).
        case corrupt(String)
        /// The database cannot be opened, read or written (I/O, permissions, disk full).
        case unavailable(String)
        /// The commit was made under an application's lease that this instance no longer holds
        /// (it expired and another instance took the application over): nothing was written.
        case leaseLost(app: String)
    }

    public let code: Code
    /// The subscription concerned, when there is one.
    public let subscriptionID: String?

    public init(_ code: Code, subscriptionID: String? = nil) {
        self.code = code
        self.subscriptionID = subscriptionID
    }

    public var description: String {
        let subject = subscriptionID.map { " (subscription \($0))" } ?? ""
        switch code {
        case .constraint(let constraint): return "the store refused the write\(subject): \(constraint)"
        case .duplicate: return "a subscription with this id exists already\(subject)"
        case .busy: return "the store is busy (locked by another writer)\(subject); try again"
        case .changeLogPruned(let through): return "the subscription change log was pruned through \(through)"
        case .corrupt(let what): return "stored data cannot be read\(subject): \(what)"
        case .unavailable(let what): return "the store is unavailable: \(what)"
        case .leaseLost(let app): return "the lease on application \(app) was lost to another instance; the batch was not committed"
        }
    }
}
