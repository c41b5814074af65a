import Foundation
import PushCore
import PushJSON

/// The subscription requests of one application: creating, removing, listing, refreshing,
/// and reading the documents the service answers with.
struct SubscriptionClient: Sendable {
    let rest: RESTClient

    /// `POST` of a subscription document: the subscription as the service keeps it.
    func create(_ document: JSON, allowsUpdate: Bool, as uid: String? = nil) async throws(PushClientError) -> NodeSubscription {
        let answer = try await rest.send(
            RESTClient.Request(method: "POST", query: allowsUpdate ? "allowsUpdate=true" : nil, body: document), as: uid)
        guard answer.status == 201 || answer.status == 200 else { throw answer.error }
        return try subscription(answer.json("POST subscription"))
    }

    /// `POST` of a document with `expirationTimestampSeconds: 0`: removes the subscription of
    /// that tuple, if there is one (no id needed).
    func remove(_ document: JSON, as uid: String? = nil) async throws(PushClientError) {
        guard case .object(let object) = document else { return }
        let body = JSON.object(object.setting(Key("expirationTimestampSeconds"), to: .int(0)))
        let answer = try await rest.send(RESTClient.Request(method: "POST", body: body), as: uid)
        guard answer.status == 204 || answer.status == 200 else { throw answer.error }
    }

    /// `DELETE` of one subscription.
    func delete(id: String, as uid: String? = nil) async throws(PushClientError) {
        let answer = try await rest.send(RESTClient.Request(method: "DELETE", segments: [id]), as: uid)
        guard answer.status == 204 || answer.status == 200 else { throw answer.error }
    }

    /// `PUT` of one subscription: its expiration pushed to `until` (Unix seconds), or by the
    /// application's default lifetime when `nil`.
    func refresh(id: String, until: Int64?, as uid: String? = nil) async throws(PushClientError) -> NodeSubscription {
        let body = until.map { JSON.object(JSONObject([(Key("expirationTimestampSeconds"), .int($0))])) }
        let answer = try await rest.send(RESTClient.Request(method: "PUT", segments: [id], body: body), as: uid)
        guard answer.status == 200 else { throw answer.error }
        return try subscription(answer.json("PUT subscription"))
    }

    /// Every subscription of the signed-in user in the application.
    func list(as uid: String? = nil) async throws(PushClientError) -> [NodeSubscription] {
        let answer = try await rest.send(RESTClient.Request(method: "GET"), as: uid)
        guard answer.status == 200 else { throw answer.error }
        guard case .array(let documents) = try answer.json("GET subscriptions") else {
            throw .invalidResponse("GET subscriptions: the answer is not a JSON array", status: answer.status)
        }
        var result: [NodeSubscription] = []
        for document in documents { result.append(try subscription(document)) }
        return result
    }

    /// A subscription from the document the service answered.
    func subscription(_ document: JSON) throws(PushClientError) -> NodeSubscription {
        guard case .object(let object) = document else {
            throw .invalidResponse("a subscription document is a JSON object, got \(document.typeName)")
        }
        func string(_ name: String) throws(PushClientError) -> String {
            guard case .string(let text)? = object[Key(name)] else {
                throw .invalidResponse("the subscription document has no string \(name)")
            }
            return text
        }
        func optionalString(_ name: String) throws(PushClientError) -> String? {
            switch object[Key(name)] {
            case nil, .null?: return nil
            case .string(let text)?: return text
            case let other?: throw .invalidResponse("the subscription document's \(name) is \(other.typeName), not a string")
            }
        }
        func date(_ name: String) throws(PushClientError) -> Date {
            guard case .int(let seconds)? = object[Key(name)] else {
                throw .invalidResponse("the subscription document has no integer \(name)")
            }
            return Date(timeIntervalSince1970: TimeInterval(seconds))
        }
        let id = try string("id")
        guard (1...128).contains(id.utf8.count), id.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "/") }) else {
            throw .invalidResponse("the subscription id \(Bounded.quoted(id)) is not an id")
        }
        let path = try string("path")
        guard let parsed = try? Path(path), parsed.string == path else {
            throw .invalidResponse("the subscription document's path \(Bounded.quoted(path)) is not a canonical path")
        }
        let kind = try string("kind")
        let context = try optionalString("context")
        let target: SubscriptionTarget
        if kind == "webhook" {
            target = .webhook(name: try string("destination"), context: context)
        } else if let deviceKind = DeviceToken.Kind(rawValue: kind), let context {
            target = .device(DeviceToken(kind: deviceKind, value: context))
        } else {
            target = .other(kind: kind, context: context)
        }
        let modeText = try optionalString("mode") ?? Mode.noData.rawValue
        let formatText = try optionalString("format") ?? PayloadFormat.v2.rawValue
        guard let mode = Mode(rawValue: modeText), let format = PayloadFormat(rawValue: formatText) else {
            throw .invalidResponse("the subscription document has mode \(Bounded.quoted(modeText)) and format \(Bounded.quoted(formatText))")
        }
        return NodeSubscription(
            id: id, path: path, target: target, mode: mode, format: format, createdAt: try date("createdAt"),
            expiresAt: try date("expirationTimestampSeconds"), encryption: object[Key("encryption")].flatMap { $0.isNull ? nil : $0 },
            client: self)
    }
}
