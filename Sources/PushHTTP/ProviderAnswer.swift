/// What a provider (FCM, HMS, APNs, a push service, a webhook) answered: the status, its
/// `Retry-After` and the body, cut at ``HTTP2Transport/maximumAnswerBytes``.
public struct ProviderAnswer: Sendable {
    public var status: Int
    /// The `Retry-After` header, if any.
    public var retryAfter: String?
    public var body: [UInt8]

    public init(status: Int, retryAfter: String? = nil, body: [UInt8]) {
        self.status = status
        self.retryAfter = retryAfter
        self.body = body
    }
}
