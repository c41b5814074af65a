import PushCore
import PushJSON

/// An instance as the others see it.
public struct InstanceInfo: Sendable, Equatable {
    public var name: String
    /// Where its HTTP API listens (`host:port`).
    public var address: String
    /// Milliseconds since the epoch, by the database's clock.
    public var startedAt: Int64
    public var heartbeatAt: Int64

    public init(name: String, address: String, startedAt: Int64, heartbeatAt: Int64) {
        self.name = name
        self.address = address
        self.startedAt = startedAt
        self.heartbeatAt = heartbeatAt
    }
}
