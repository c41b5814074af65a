import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PushCore
import PushJSON
import PushJOSE
import PushService
import PushFakes
import Synchronization

extension Demo {
    // MARK: - Helpers

    func lines(_ name: String) throws -> [String] {
        String(decoding: try Data(contentsOf: fixtures.appendingPathComponent(name)), as: UTF8.self).split(separator: "\n").map(String.init)
    }

    func summary(_ line: String) -> String { line.clipped(110) }

    func token() throws -> String {
        let now = Int64(Date().timeIntervalSince1970)
        let claims: JSON = ["sub": "alice", "iat": .int(now), "exp": .int(now + 600)]
        let key = try JWK(json: ["kty": "oct", "k": .string(Base64URL.encodeToString(Array(secret.utf8)))])
        var writer = JSONWriter()
        writer.write(claims)
        return String(decoding: try JWSSigner(key: key, algorithm: .hs256).sign(writer.bytes), as: UTF8.self)
    }

    func get(_ path: String) async throws -> (status: Int, body: [UInt8]) {
        try await request(path, method: .GET, body: nil, authorized: false)
    }

    /// An operator's read (`/metrics`, `/status`, `/ops/v1`): with the operations token.
    func operations(_ path: String) async throws -> (status: Int, body: [UInt8]) {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
        request.headers.add(name: "authorization", value: "Bearer " + operationsToken)
        let response = try await client.execute(request, timeout: .seconds(10))
        return (Int(response.status.code), Array(buffer: try await response.body.collect(upTo: 1 << 22)))
    }

    func request(_ path: String, method: HTTPMethod, body: [UInt8]?, authorized: Bool = true) async throws -> (status: Int, body: [UInt8]) {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
        request.method = method
        if authorized { request.headers.add(name: "authorization", value: "Bearer " + (try token())) }
        if let body {
            request.headers.add(name: "content-type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let response = try await client.execute(request, timeout: .seconds(10))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        return (Int(response.status.code), Array(buffer: bytes))
    }
}

struct DemoError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}


extension String {
    func clipped(_ limit: Int) -> String {
        count <= limit ? self : String(prefix(limit)) + "… (\(utf8.count) bytes)"
    }
}
