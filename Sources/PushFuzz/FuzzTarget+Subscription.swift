import PushCore
import PushJOSE
import PushJSON
import PushMatching

extension FuzzTarget {
    /// `subscription`: subscription request bodies (SPEC §5): `SubscriptionRequest.decode`,
    /// then the application's checks (`SubscriptionRules`: webhook names, lifetimes, the
    /// `encryption` block against the test key set).
    ///
    /// - A refusal: a message that is non-empty and bounded.
    /// - An accepted request reads back: written as a request body again, it decodes to the
    ///   same request (contexts are kept canonical).
    /// - Its expiration is in the future and within the maximum lifetime.
    public static func subscription(_ data: UnsafeBufferPointer<UInt8>) throws(FuzzViolation) {
        guard let json = try? JSONParser.parse(data) else { return }
        let request: SubscriptionRequest
        do {
            request = try SubscriptionRequest.decode(json, app: "toto", uid: "u1")
        } catch {
            try Check.message(error.description, "a subscription request's error")
            return
        }
        let body = subscriptionBody(request)
        switch Result(catching: { () throws(RequestError) in try SubscriptionRequest.decode(body, app: "toto", uid: "u1") }) {
        case .success(let again):
            try Check.that(again == request, "a request written back decodes to another one: \(Check.excerpt(body.description))")
        case .failure(let error):
            throw FuzzViolation("a request written back is refused (\(error)): \(Check.excerpt(body.description))")
        }
        do {
            try subscriptionRules.check(request)
        } catch {
            try Check.message(error.description, "a subscription check's error")
        }
        let now: Int64 = 1_700_000_000
        switch Result(catching: { () throws(RequestError) in try subscriptionRules.lifetimes.expiration(requested: request.expiration, now: now) }) {
        case .success(let expiration):
            try Check.that(expiration > now && expiration <= now + subscriptionRules.lifetimes.maxLifetime, "expiration \(expiration) at \(now)")
        case .failure(let error):
            try Check.message(error.description, "an expiration's error")
        }
    }

    /// What the test application allows: one webhook, the standard lifetimes, the test keys.
    static let subscriptionRules: SubscriptionRules = {
        let sealers = EventSealerFactory(keys: joseKeys)
        return SubscriptionRules(webhooks: ["orders"], lifetimes: .standard) { spec throws(RequestError) in try sealers.checkEncryption(spec) }
    }()

    /// The request as a client would send it.
    static func subscriptionBody(_ request: SubscriptionRequest) -> JSON {
        var members: [(Key, JSON)] = [
            ("kind", .string(request.kind.rawValue)), ("mode", .string(request.mode.rawValue)), ("path", .string(request.path.string)),
            ("format", .string(request.format.rawValue)),
        ]
        if let context = request.context { members.append(("context", .string(context))) }
        if let destination = request.destination { members.append(("destination", .string(destination))) }
        if let encryption = request.encryption {
            var fields: [(Key, JSON)] = [("alg", .string(encryption.alg)), ("enc", .string(encryption.enc))]
            if let kid = encryption.kid { fields.append(("kid", .string(kid))) }
            if let jwk = encryption.jwk { fields.append(("jwk", jwk)) }
            members.append(("encryption", .object(JSONObject(fields))))
        }
        if let expiration = request.expiration { members.append(("expirationTimestampSeconds", .int(expiration))) }
        return .object(JSONObject(members))
    }
}
