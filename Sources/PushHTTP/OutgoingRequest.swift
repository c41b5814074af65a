/// A request a sender makes: a POST to `url` with `headers` and `body`.
public struct OutgoingRequest: Sendable {
    public var url: String
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(url: String, headers: [(String, String)], body: [UInt8]) {
        self.url = url
        self.headers = headers
        self.body = body
    }
}
