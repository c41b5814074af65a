import PushCore
import PushJSON

/// What a batch processed by an application's owner commits under: the lease it holds and the
/// inbox rows it consumed. The commit writes nothing, and fails with ``StoreError/Kind/leaseLost``,
/// unless `holder` still holds `app` under `token`; the consumed rows are deleted with the batch.
public struct LeaseFence: Sendable, Equatable {
    public var app: String
    public var token: Int64
    public var holder: String
    /// The inbox rows the batch processed.
    public var consumed: [Int64]

    public init(app: String, token: Int64, holder: String, consumed: [Int64]) {
        self.app = app
        self.token = token
        self.holder = holder
        self.consumed = consumed
    }
}
