import AsyncHTTPClient
import NIOCore
import PushCore
import PushJSON

/// Reads `GET /status` of a running service (`pushdispatch status`).
public enum StatusClient {
    /// The base URL of the service `configuration` describes (its `http.host` and `http.port`;
    /// an address listening on every interface is reached on loopback).
    public static func baseURL(_ configuration: ServiceConfiguration) -> String {
        var host = configuration.http.host
        if host == "0.0.0.0" || host.isEmpty { host = "127.0.0.1" } else if host == "::" { host = "::1" }
        return "http://" + (host.contains(":") ? "[\(host)]" : host) + ":\(configuration.http.port)"
    }

    /// The `/status` document's bytes (at most 1 MiB), or why there is none.
    public static func fetch(base: String, token: String? = nil) async throws(StatusError) -> [UInt8] {
        try await request(base: base, path: "/status", token: token)
    }

    /// The answer of an operations route (`GET`, or `POST` of a JSON `body`): its bytes (at most
    /// 4 MiB) when it is 200, or why there are none (the service's own error message when it
    /// answered one).
    public static func request(base: String, path: String, body: [UInt8]? = nil, token: String?) async throws(StatusError) -> [UInt8] {
        var base = base
        while base.hasSuffix("/") { base.removeLast() }
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let fetched: Result<[UInt8], StatusError>
        do {
            var request = HTTPClientRequest(url: base + path)
            if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
            if let body {
                request.method = .POST
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(bytes: body))
            }
            let response = try await client.execute(request, timeout: .seconds(30))
            let answer = Array(buffer: try await response.body.collect(upTo: 4 << 20))
            if response.status.code == 200 {
                fetched = .success(answer)
            } else if response.status.code != 401 && response.status.code != 403,
                let message = (try? JSONParser.parse(answer))?["message"]?.stringValue
            {
                fetched = .failure(StatusError("\(base)\(path.split(separator: "?").first ?? "") answered \(response.status.code): \(message)"))
            } else {
                let hint =
                    response.status.code == 401
                    ? token == nil
                        ? " (the service requires its operations token: give --config with http.operationsToken, or set PUSHDISPATCH_HTTP_OPERATIONSTOKEN)"
                        : " (the operations token was refused)"
                    : response.status.code == 403
                        ? " (the service listens beyond loopback without an operations token: set http.operationsToken in its configuration)"
                        : ""
                fetched = .failure(StatusError("\(base)\(path.split(separator: "?").first ?? "") answered \(response.status.code)\(hint)"))
            }
        } catch {
            fetched = .failure(StatusError("cannot reach the service at \(base): \(error)"))
        }
        try? await client.shutdown()
        return try fetched.get()
    }
}

/// The service's status cannot be read: why.
public struct StatusError: Error, Sendable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
