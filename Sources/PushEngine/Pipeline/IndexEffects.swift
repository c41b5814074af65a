import PushCore
import PushJSON

/// What staged records do to the in-memory index, as values: the subscriptions they revoked
/// (forgotten), and the evaluations of read access that allowed a subscription (admitted, with
/// what the evaluation read; SPEC §12.5). They go with the batch and are applied
/// (``SubscriptionLookup/apply(_:)``) once it committed, so that a batch that fails to commit
/// leaves the index as it was. Until then, the records after them see them through an
/// ``IndexOverlay``.
public struct IndexEffects: Sendable {
    /// An evaluation that allowed a subscription.
    public struct Admission: Sendable, Equatable {
        public var handle: Int64
        public var app: String
        /// The subscribed node.
        public var path: Path
        /// `{"uid": …, "token": {claims}}`.
        public var auth: JSON
        /// What the evaluation read.
        public var reads: [Path]

        public init(handle: Int64, app: String, path: Path, auth: JSON, reads: [Path]) {
            self.handle = handle
            self.app = app
            self.path = path
            self.auth = auth
            self.reads = reads
        }
    }

    /// Subscriptions revoked, with their applications, in order.
    public internal(set) var forgotten: [(app: String, match: IndexMatch)] = []
    /// Admissions, in order (a later one of a handle replaces an earlier one).
    public internal(set) var admitted: [Admission] = []

    public init() {}

    public var isEmpty: Bool { forgotten.isEmpty && admitted.isEmpty }

    /// The handles forgotten, in order.
    public var forgottenHandles: [Int64] { forgotten.map(\.match.handle) }
}
