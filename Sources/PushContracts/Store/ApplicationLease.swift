import PushCore
import PushJSON

/// Who owns an application's processing, until when, under which fencing token.
public struct ApplicationLease: Sendable, Equatable {
    public var app: String
    public var owner: String
    /// Grows by one at every change of owner: a commit made under an older token is refused.
    public var token: Int64
    /// Milliseconds since the epoch, by the database's clock.
    public var expiresAt: Int64

    public init(app: String, owner: String, token: Int64, expiresAt: Int64) {
        self.app = app
        self.owner = owner
        self.token = token
        self.expiresAt = expiresAt
    }
}
