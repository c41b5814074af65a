import Foundation
import PushCore
import PushJSON
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The subscription REST API of SPEC §5, over `URLSession`: URLs built from the base URL, the
/// application and the user, the bearer token of the app's credentials provider (asked again,
/// once, for a fresh one after a 401), a deadline on every request.
struct RESTClient: Sendable {
    let baseURL: URL
    let app: String
    let credentials: CredentialsProvider
    let timeout: Duration
    let session: URLSession
    /// The uid the credentials provider named last: what an operation queued now is for.
    let lastUID = LastUID()

    /// Failures before any byte of the request could reach the service: no route, no name, no
    /// connection, no TLS session.
    static let neverSent: Set<URLError.Code> = [
        .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet, .secureConnectionFailed,
    ]

    /// Largest answer body read (a list of subscriptions is a few hundred kilobytes at most).
    static let maxAnswerBytes = 16 << 20

    /// What a request is made of; the URL is built once the uid is known.
    struct Request: Sendable {
        var method: String
        /// Path segments after `/datasync/v2/{app}/subscriptions/{uid}`, each percent-encoded.
        var segments: [String] = []
        var query: String?
        var body: JSON?
    }

    init(baseURL: URL, app: String, credentials: @escaping CredentialsProvider, timeout: Duration, session: URLSession)
        throws(PushClientError)
    {
        guard let scheme = baseURL.scheme?.lowercased(), let host = baseURL.host, !host.isEmpty else {
            throw .invalidArgument("the base URL needs a scheme and a host, such as https://push.example.com")
        }
        let loopback = ["localhost", "127.0.0.1", "::1", "[::1]"].contains(host.lowercased())
        guard scheme == "https" || (scheme == "http" && loopback) else {
            throw .invalidArgument(
                "the base URL must be https:// (http:// only for a loopback host): the application's keys are fetched from it")
        }
        guard baseURL.query == nil, baseURL.fragment == nil else {
            throw .invalidArgument("the base URL may not carry a query or a fragment")
        }
        do {
            try AppID.validate(app, field: "app")
        } catch {
            throw .invalidArgument(error.message)
        }
        self.baseURL = baseURL
        self.app = app
        self.credentials = credentials
        self.timeout = timeout
        self.session = session
    }

    /// Sends `request` for the signed-in user. A 401 asks the provider for fresh credentials
    /// and tries once more. With `uid`, the request is for that user only: credentials for
    /// another are ``PushClientError/Code/userChanged``, and nothing is sent.
    func send(_ request: Request, as uid: String? = nil) async throws(PushClientError) -> HTTPAnswer {
        var answer = try await send(request, credentials: try await currentCredentials(forceRefresh: false, for: uid))
        if answer.status == 401 {
            answer = try await send(request, credentials: try await currentCredentials(forceRefresh: true, for: uid))
        }
        return answer
    }

    /// The provider's credentials, checked to be for `uid` when one is given.
    func currentCredentials(forceRefresh: Bool, for uid: String?) async throws(PushClientError) -> Credentials {
        let current = try await currentCredentials(forceRefresh: forceRefresh)
        if let uid, current.uid != uid {
            throw PushClientError(
                .userChanged,
                "this operation was queued for the user \(Bounded.quoted(uid)); the credentials are now for \(Bounded.quoted(current.uid))")
        }
        return current
    }

    func currentCredentials(forceRefresh: Bool) async throws(PushClientError) -> Credentials {
        let current: Credentials
        do {
            current = try await credentials(forceRefresh)
        } catch {
            throw PushClientError(.credentials, "the credentials provider failed: \(Bounded.text(String(describing: error), limit: 200))")
        }
        let uid = current.uid.utf8
        guard !uid.isEmpty, uid.count <= 256, !uid.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
            throw PushClientError(.credentials, "the uid is 1 to 256 bytes without control characters")
        }
        guard !current.token.isEmpty, current.token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw PushClientError(.credentials, "the bearer token is empty or holds characters a header cannot carry")
        }
        lastUID.set(current.uid)
        return current
    }

    func send(_ request: Request, credentials: Credentials) async throws(PushClientError) -> HTTPAnswer {
        let url = try collectionURL(uid: credentials.uid, segments: request.segments, query: request.query)
        var urlRequest = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: Self.seconds(timeout))
        urlRequest.httpMethod = request.method
        urlRequest.setValue("Bearer " + credentials.token, forHTTPHeaderField: "Authorization")
        urlRequest.setValue("application/json", forHTTPHeaderField: "Accept")
        if let body = request.body {
            var writer = JSONWriter(capacity: 512)
            writer.write(body)
            urlRequest.httpBody = Data(writer.bytes)
            urlRequest.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        return try await perform(urlRequest, what: "\(request.method) subscriptions")
    }

    /// `GET` of a URL under the base URL without credentials (the public keys).
    func getPublic(_ path: String) async throws(PushClientError) -> HTTPAnswer {
        let url = baseURL.appendingPathComponent(path)
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: Self.seconds(timeout))
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        return try await perform(request, what: "GET /\(path)")
    }

    func perform(_ request: URLRequest, what: String) async throws(PushClientError) -> HTTPAnswer {
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: request)
        } catch {
            var failure = PushClientError(.transport, "\(what): no answer from the service (\(Bounded.text(error.localizedDescription, limit: 200)))")
            if let code = (error as? URLError)?.code, Self.neverSent.contains(code) { failure.neverSent = true }
            throw failure
        }
        guard let http = response as? HTTPURLResponse else {
            throw .invalidResponse("\(what): the answer is not HTTP")
        }
        guard data.count <= Self.maxAnswerBytes else {
            throw .invalidResponse("\(what): the answer has \(data.count) bytes, more than \(Self.maxAnswerBytes)", status: http.statusCode)
        }
        return HTTPAnswer(status: http.statusCode, contentLocation: http.value(forHTTPHeaderField: "Content-Location"), body: [UInt8](data))
    }

    /// `{base}/datasync/v2/{app}/subscriptions/{uid}[/segments…][?query]`.
    func collectionURL(uid: String, segments: [String], query: String?) throws(PushClientError) -> URL {
        var text = baseURL.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        text += "/datasync/v2/" + Self.percentEncoded(app) + "/subscriptions/" + Self.percentEncoded(uid)
        for segment in segments { text += "/" + Self.percentEncoded(segment) }
        if let query { text += "?" + query }
        guard let url = URL(string: text) else {
            throw .invalidArgument("cannot build a URL from the base URL, the application and the uid")
        }
        return url
    }

    /// A path segment with every byte but RFC 3986's unreserved ones percent-encoded; a
    /// segment of dots only has them encoded too (`.` and `..` would be resolved away).
    static func percentEncoded(_ segment: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        if !segment.isEmpty, segment.utf8.allSatisfy({ $0 == UInt8(ascii: ".") }) {
            return String(repeating: "%2E", count: segment.utf8.count)
        }
        var out: [UInt8] = []
        for byte in segment.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A duration in seconds for `URLRequest`: clamped to 1 ms … 1 day.
    static func seconds(_ duration: Duration) -> TimeInterval {
        let (seconds, attoseconds) = duration.components
        let value = Double(seconds) + Double(attoseconds) / 1e18
        return min(max(value, 0.001), 86_400)
    }
}

/// The uid of the last credentials the provider gave, shared by the copies of a ``RESTClient``.
final class LastUID: Sendable {
    private let value = Mutex<String?>(nil)

    func set(_ uid: String) {
        value.withLock { $0 = uid }
    }

    func get() -> String? {
        value.withLock { $0 }
    }
}
