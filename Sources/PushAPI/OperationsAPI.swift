import Crypto
import HTTPTypes
import Hummingbird
import NIOCore
import PushContracts
import PushCore
import PushJSON

/// The most events waiting for a slow reader of `GET /ops/v1/events` (older ones are dropped).
enum AttemptFeedLimits {
    static let buffer = 1_024
}

/// A sender that stopped sending, and why (`GET /ops/v1/senders`).
public struct PausedSender: Sendable, Equatable {
    public var app: String
    public var provider: String
    public var destination: String?
    public var reason: String
    /// Milliseconds since the epoch.
    public var since: Int64
    /// When it is tried again.
    public var probeAt: Int64
    /// The instance where it is paused (each instance pauses on the answers it gets).
    public var instance: String?

    public init(app: String, provider: String, destination: String?, reason: String, since: Int64, probeAt: Int64, instance: String? = nil) {
        self.instance = instance
        self.app = app
        self.provider = provider
        self.destination = destination
        self.reason = reason
        self.since = since
        self.probeAt = probeAt
    }
}

/// What the operations API acts on beyond the history: the running service's senders, its live
/// feed of attempts, the read rules, the overview (PushService implements it).
public protocol OperationsControl: Sendable {
    var history: any HistoryStore { get }
    /// Milliseconds since the epoch (the service clock).
    var now: Int64 { get }
    /// `GET /ops/v1/overview`.
    func overview() async -> JSON
    /// The senders paused now.
    func pausedSenders() async -> [PausedSender]
    /// Resumes the sender of `app` and `kind` (and webhook `destination`) at once, on every
    /// instance: whether it was paused (here, or on another instance by its last report).
    func resume(app: String, kind: SubscriptionKind, destination: String?) async -> Bool
    /// The attempts settled from now on.
    func watch() -> AsyncStream<DeliveryAttempt>
    /// The rules' answer for reading `path` of `app` with `auth` (`rules check --path`).
    func simulate(app: String, path: String, auth: JSON) async throws -> JSON
    /// This instance's dead letters matching `filter`, oldest first.
    func deadLetters(_ filter: DeadLetterFilter, cursor: Int64?, limit: Int) async throws -> HistoryPage<DeadLetterEntry>
    /// Checks the dead letters matching `filter` again as the service now would, and (unless
    /// `dryRun`) applies those now valid, once each, in their order.
    func redrive(_ filter: DeadLetterFilter, dryRun: Bool) async throws -> RedriveResult
    /// Queues again the notifications discarded since the filter's time, and has them claimed
    /// at once (not with the next record); answers how many.
    func recover(_ filter: RecoveryFilter) async throws -> Int
}

extension OperationsControl {
    /// Queues them again in the history's store; a control with a dispatcher also wakes it.
    public func recover(_ filter: RecoveryFilter) async throws -> Int {
        try await history.recover(filter, now: now)
    }
}

/// The operations API under `/ops/v1` (SPEC §13.3): read the delivery history, find
/// subscriptions, follow attempts live, resume senders, recover discarded notifications, try
/// the read rules. Behind the same gate as `/metrics` and `/status` (``OperationsRoutes``).
/// Device tokens are never shown whole (``OperationsAPI/redacted(_:)``).
public struct OperationsAPI: Sendable {
    let control: any OperationsControl
    let gate: OperationsRoutes

    /// Items per page: the default and the most.
    public static let defaultLimit = 50
    public static let maximumLimit = 500
    /// The largest request body (filters, rule checks).
    public static let maxBodyBytes = 64 << 10

    public init(control: any OperationsControl, gate: OperationsRoutes) {
        self.control = control
        self.gate = gate
    }

    public func add(to router: Router<BasicRequestContext>) {
        let routes: [(HTTPRequest.Method, String, @Sendable (Request, BasicRequestContext) async throws -> Response)] = [
            (.get, "ops/v1/overview", { _, _ in Response.json(await control.overview()) }),
            (.get, "ops/v1/subscriptions", { request, _ in try await subscriptions(request) }),
            (.get, "ops/v1/subscriptions/:app/:id/history", { request, context in try await history(request, context) }),
            (.get, "ops/v1/records/:app/:seq", { request, context in try await record(request, context) }),
            (.get, "ops/v1/senders", { _, _ in Response.json(["items": .array(await control.pausedSenders().map(Self.json)), "nextCursor": .null]) }),
            (.post, "ops/v1/senders/resume", { request, _ in try await resume(request) }),
            (.post, "ops/v1/recover", { request, _ in try await recover(request) }),
            (.get, "ops/v1/events", { request, _ in try events(request) }),
            (.post, "ops/v1/rules/simulate", { request, _ in try await simulate(request) }),
            (.get, "ops/v1/deadletter", { request, _ in try await deadLetters(request) }),
            (.post, "ops/v1/deadletter/redrive", { request, _ in try await redrive(request) }),
        ]
        for (method, path, handler) in routes {
            router.on(RouterPath(path), method: method) { request, context -> Response in
                if let refusal = gate.refusal(request) { return refusal }
                return try await handler(request, context)
            }
        }
    }

    // MARK: - Routes

    func subscriptions(_ request: Request) async throws -> Response {
        let query = SubscriptionQuery(
            app: try query(request, "app"), uid: try query(request, "uid"), path: try query(request, "path"), token: try query(request, "token"))
        guard query.app != nil || query.uid != nil || query.path != nil || query.token != nil else {
            throw APIError.badRequest("give at least one of app, uid, path or token (the whole device token, matched exactly)")
        }
        if let path = query.path, !path.hasPrefix("/") { throw APIError.badRequest("path: expected a path starting with /, got \(quotedText(path))") }
        let page = try await control.history.subscriptions(matching: query, cursor: try cursor(request), limit: try limit(request))
        return Response.json(["items": .array(page.items.map(Self.json)), "nextCursor": page.nextCursor.map { .string(String($0)) } ?? .null])
    }

    func history(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let app = try parameter("app", context)
        let id = try parameter("id", context)
        let page = try await control.history.attempts(app: app, subscription: id, cursor: try cursor(request), limit: try limit(request))
        return Response.json(["items": .array(page.items.map(Self.json)), "nextCursor": page.nextCursor.map { .string(String($0)) } ?? .null])
    }

    func record(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let app = try parameter("app", context)
        let text = try parameter("seq", context)
        guard let seq = Int64(text), seq >= 0 else { throw APIError.badRequest("seq: expected a record's seq (a non-negative integer), got \(quotedText(text))") }
        let fate = try await control.history.fate(app: app, seq: seq)
        var notifications: [JSON] = []
        for item in fate.notifications {
            notifications.append(
                Self.object([
                    ("notification", .int(item.notification)), ("subscription", .string(item.subscription)), ("state", .string(item.state.rawValue)),
                    ("kind", item.kind.map { .string($0) }), ("attempts", .array(item.attempts.map(Self.json))),
                ]))
        }
        let nothing: [JSON] = fate.nothing.map { ["subscription": .string($0.subscription), "why": .string($0.why.rawValue), "at": .int($0.at)] }
        return Response.json(["app": .string(app), "seq": .int(seq), "notifications": .array(notifications), "nothing": .array(nothing)])
    }

    func resume(_ request: Request) async throws -> Response {
        let body = try await jsonBody(request)
        let app = try requiredString(body, "app")
        let kind = try provider(body, required: true)!
        let destination = try optionalString(body, "destination")
        if kind == .webhook, destination == nil {
            throw APIError.badRequest("destination: a webhook sender is one destination; give its name")
        }
        let resumed = await control.resume(app: app, kind: kind, destination: destination)
        guard resumed else {
            throw APIError.notFound("no paused sender for \(app)/\(Self.providerName(kind))\(destination.map { "/\($0)" } ?? ""); GET /ops/v1/senders lists them")
        }
        return Response.json(["resumed": true])
    }

    func recover(_ request: Request) async throws -> Response {
        let body = try await jsonBody(request)
        let app = try requiredString(body, "app")
        let kind = try provider(body, required: false)
        let destination = try optionalString(body, "destination")
        guard let since = body["since"]?.integerValue, since >= 0 else {
            throw APIError.badRequest("since: expected a time in milliseconds since the epoch (notifications discarded from then on are queued again)")
        }
        let count = try await control.recover(RecoveryFilter(app: app, kind: kind, destination: destination, since: since))
        return Response.json(["recovered": .int(Int64(count))])
    }

    func events(_ request: Request) throws -> Response {
        let parameters = request.uri.queryParameters
        let app = try query(request, "app")
        let provider = try query(request, "provider")
        if let provider, Self.kind(provider) == nil, provider != "none" {
            throw APIError.badRequest("provider: expected fcm, hms, harmonyos, apns, webpush or webhook, got \(quotedText(provider))")
        }
        let outcome = try parameters.get("outcome").map { text -> DeliveryAttempt.Outcome in
            guard let outcome = DeliveryAttempt.Outcome(rawValue: text) else {
                throw APIError.badRequest(
                    "outcome: expected one of \(DeliveryAttempt.Outcome.allCases.map(\.rawValue).joined(separator: ", ")), got \(quotedText(text))")
            }
            return outcome
        }
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-store"
        // HEAD: the stream's headers, and no watcher left behind for a body never read.
        if request.method == .head { return Response(status: .ok, headers: headers) }
        let attempts = control.watch()
        let heartbeat = Self.heartbeat
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                // A comment first: the client knows the stream is open. Then each attempt as an
                // event, and a comment every `heartbeat` so that a client gone away is noticed
                // (the write fails) even when nothing happens. The stream ends when the service
                // stops (the feed finishes its watchers first).
                try await writer.write(ByteBuffer(string: ": pushdispatch delivery attempts\n\n"))
                let (events, continuation) = AsyncStream.makeStream(of: [UInt8].self, bufferingPolicy: .bufferingNewest(AttemptFeedLimits.buffer))
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await attempt in attempts {
                            if let app, attempt.app != app { continue }
                            if let provider, attempt.provider != provider { continue }
                            if let outcome, attempt.outcome != outcome { continue }
                            var json = JSONWriter(capacity: 256)
                            json.write(Self.json(attempt))
                            continuation.yield(Array("event: attempt\ndata: ".utf8) + json.bytes + Array("\n\n".utf8))
                        }
                        continuation.finish()
                    }
                    group.addTask {
                        while !Task.isCancelled {
                            try await Task.sleep(for: heartbeat)
                            continuation.yield(Array(": keep-alive\n\n".utf8))
                        }
                    }
                    defer { group.cancelAll() }
                    for await bytes in events { try await writer.write(ByteBuffer(bytes: bytes)) }
                }
                try await writer.finish(nil)
            })
    }

    /// How often an idle event stream writes a comment.
    public static let heartbeat: Duration = .seconds(15)

    func deadLetters(_ request: Request) async throws -> Response {
        let parameters = request.uri.queryParameters
        func time(_ name: String) throws -> Int64? {
            guard let text = parameters.get(name) else { return nil }
            guard let value = Int64(text), value >= 0 else {
                throw APIError.badRequest("\(name): expected milliseconds since the epoch, got \(quotedText(String(text)))")
            }
            return value
        }
        let filter = DeadLetterFilter(reason: try query(request, "reason"), app: try query(request, "app"), since: try time("since"), until: try time("until"))
        let page = try await control.deadLetters(filter, cursor: try cursor(request), limit: try limit(request))
        let items: [JSON] = page.items.map { entry in
            Self.object([
                ("index", .int(entry.index)), ("ts", .int(entry.timestamp)), ("source", .string(entry.source)), ("position", .int(entry.position)),
                ("reason", .string(entry.reason)), ("app", entry.app.map { .string($0) } ?? .null), ("seq", entry.seq.map { .int($0) } ?? .null),
                ("line", Self.object([("bytes", .int(Int64(entry.bytes))), ("sha256", .string(entry.sha256)), ("head", .string(entry.head))])),
            ])
        }
        return Response.json(["items": .array(items), "nextCursor": page.nextCursor.map { .string(String($0)) } ?? .null])
    }

    func redrive(_ request: Request) async throws -> Response {
        let body = try await jsonBody(request)
        func time(_ key: String) throws -> Int64? {
            guard let value = body[key], !value.isNull else { return nil }
            guard let number = value.integerValue, number >= 0 else { throw APIError.badRequest("\(key): expected milliseconds since the epoch") }
            return number
        }
        var dryRun = false
        if let value = body["dryRun"], !value.isNull {
            guard let flag = value.boolValue else { throw APIError.badRequest("dryRun: expected true or false") }
            dryRun = flag
        }
        let filter = DeadLetterFilter(
            reason: try optionalString(body, "reason"), app: try optionalString(body, "app"), since: try time("since"), until: try time("until"))
        let result = try await control.redrive(filter, dryRun: dryRun)
        return Response.json([
            "dryRun": .bool(dryRun), "applied": .int(Int64(result.applied)), "refused": .int(Int64(result.refused)),
            "alreadyRedriven": .int(Int64(result.alreadyRedriven)), "notRedrivable": .int(Int64(result.notRedrivable)),
        ])
    }

    func simulate(_ request: Request) async throws -> Response {
        let body = try await jsonBody(request)
        let app = try requiredString(body, "app")
        let path = try requiredString(body, "path")
        let auth = body["auth"] ?? .null
        guard auth.isNull || auth.objectValue != nil else { throw APIError.badRequest("auth: expected an object (the token's claims) or null") }
        do {
            return Response.json(try await control.simulate(app: app, path: path, auth: auth))
        } catch let error as RequestError {
            throw APIError.badRequest(error.message)
        }
    }

    // MARK: - Requests

    func parameter(_ name: String, _ context: BasicRequestContext) throws -> String {
        guard let raw = context.parameters.get(name) else { throw APIError.notFound("missing \(name)") }
        guard let decoded = raw.removingPercentEncoding else { throw APIError.badRequest("\(name): invalid percent-encoding") }
        return try Self.withoutNUL(decoded, name)
    }

    /// The query parameter `name`, if given.
    func query(_ request: Request, _ name: String) throws -> String? {
        try request.uri.queryParameters.get(name).map { try Self.withoutNUL($0, name) }
    }

    /// `text`, unless it holds U+0000: no stored value does (PostgreSQL's text cannot), so a
    /// filter or name with it is a client's mistake, answered 400 on either store.
    static func withoutNUL(_ text: String, _ name: String) throws -> String {
        guard !text.utf8.contains(0) else { throw APIError.badRequest("\(name): contains the character U+0000 (NUL)") }
        return text
    }

    func limit(_ request: Request) throws -> Int {
        guard let text = request.uri.queryParameters.get("limit") else { return Self.defaultLimit }
        guard let limit = Int(text), (1...Self.maximumLimit).contains(limit) else {
            throw APIError.badRequest("limit: expected 1 to \(Self.maximumLimit), got \(quotedText(String(text)))")
        }
        return limit
    }

    func cursor(_ request: Request) throws -> Int64? {
        guard let text = request.uri.queryParameters.get("cursor") else { return nil }
        guard let cursor = Int64(text), cursor >= 0 else {
            throw APIError.badRequest("cursor: expected the nextCursor of the previous page, got \(quotedText(String(text)))")
        }
        return cursor
    }

    func jsonBody(_ request: Request) async throws -> JSON {
        try await Self.jsonBody(request)
    }

    /// The body, a JSON object: 415 unless `application/json`, 413 beyond ``maxBodyBytes``,
    /// 400 unless a JSON object (a repeated key included).
    static func jsonBody(_ request: Request) async throws -> JSON {
        let buffer = try await request.body.collect(upTo: Self.maxBodyBytes)
        let contentType = request.headers[.contentType]?.lowercased() ?? ""
        let mediaType = contentType.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        guard mediaType == "application/json" else {
            throw APIError(.unsupportedMediaType, .unsupportedMediaType, "the body must be JSON with Content-Type: application/json")
        }
        let json: JSON
        do {
            json = try JSONParser.parseRejectingDuplicateKeys(Array(buffer.readableBytesView))
        } catch {
            throw APIError.badRequest("the body is not valid JSON: \(error)")
        }
        guard json.objectValue != nil else { throw APIError.badRequest("the body must be a JSON object") }
        return json
    }

    func requiredString(_ body: JSON, _ key: String) throws -> String {
        guard let value = try optionalString(body, key) else { throw APIError.badRequest("\(key): required") }
        return value
    }

    func optionalString(_ body: JSON, _ key: String) throws -> String? {
        guard let value = body[key], !value.isNull else { return nil }
        guard let text = value.stringValue, !text.isEmpty, text.utf8.count <= 2048 else {
            throw APIError.badRequest("\(key): expected a non-empty string of at most 2048 bytes")
        }
        return try Self.withoutNUL(text, key)
    }

    func provider(_ body: JSON, required: Bool) throws -> SubscriptionKind? {
        guard let text = try optionalString(body, "provider") else {
            if required { throw APIError.badRequest("provider: required (fcm, hms, harmonyos, apns, webpush or webhook)") }
            return nil
        }
        guard let kind = Self.kind(text) else { throw APIError.badRequest("provider: expected fcm, hms, harmonyos, apns, webpush or webhook, got \(quotedText(text))") }
        return kind
    }

    /// The subscription kind a provider delivers.
    public static func kind(_ provider: String) -> SubscriptionKind? {
        switch provider {
        case "fcm": .fcm
        case "hms": .hms
        case "harmonyos": .harmonyos
        case "apns": .apns
        case "webpush": .webpush
        case "webhook": .webhook
        default: nil
        }
    }

    public static func providerName(_ kind: SubscriptionKind) -> String {
        switch kind {
        case .fcm: "fcm"
        case .hms: "hms"
        case .harmonyos: "harmonyos"
        case .apns: "apns"
        case .webpush: "webpush"
        case .webhook: "webhook"
        }
    }

    // MARK: - Answers

    /// A device token (or any secret-bearing context) as an operator may see it (SPEC §13.1):
    /// its first 6 and last 4 characters and the first 12 hex digits of its SHA-256. A token
    /// of 16 characters or fewer shows no characters, only its digest.
    public static func redacted(_ token: String) -> JSON {
        let digest = SHA256.hash(data: Array(token.utf8)).prefix(6).map { byte in
            let hex = Array("0123456789abcdef".utf8)
            return String(decoding: [hex[Int(byte >> 4)], hex[Int(byte & 15)]], as: UTF8.self)
        }.joined()
        let characters = Array(token)
        guard characters.count > 16 else { return ["head": "", "tail": "", "sha256": .string(digest)] }
        return ["head": .string(String(characters.prefix(6))), "tail": .string(String(characters.suffix(4))), "sha256": .string(digest)]
    }

    /// An object of the members given (`nil` ones left out).
    static func object(_ members: [(String, JSON?)]) -> JSON {
        .object(JSONObject(members.compactMap { key, value in value.map { (Key(key), $0) } }))
    }

    public static func json(_ attempt: DeliveryAttempt) -> JSON {
        object([
            ("notification", .int(attempt.notification)), ("subscription", .string(attempt.subscription)), ("app", .string(attempt.app)),
            ("seq", attempt.seq.map { .int($0) } ?? .null), ("provider", .string(attempt.provider)),
            ("destination", attempt.destination.map { .string($0) } ?? .null), ("attempt", .int(Int64(attempt.attempt))), ("at", .int(attempt.at)),
            ("status", attempt.status.map { .int(Int64($0)) }), ("reason", attempt.reason.map { .string($0) }),
            ("latencyMs", attempt.latencyMs.map { .int($0) }), ("outcome", .string(attempt.outcome.rawValue)), ("nextAt", attempt.nextAt.map { .int($0) }),
        ])
    }

    static func json(_ found: SubscriptionFound) -> JSON {
        let subscription = found.subscription
        return object([
            ("id", .string(subscription.id)), ("app", .string(subscription.app)), ("uid", .string(subscription.uid)),
            ("provider", .string(providerName(subscription.kind))), ("path", .string(subscription.path.string)),
            ("mode", .string(subscription.mode.rawValue)), ("format", .string(subscription.format.rawValue)),
            ("destination", subscription.tuple.destination.map { .string($0) }), ("token", subscription.tuple.context.map(redacted)),
            ("createdAt", .int(subscription.createdAt)), ("expiresAt", .int(subscription.expiresAt)),
            ("lastAttempt", found.lastAttempt.map(json) ?? .null),
        ])
    }

    public static func json(_ sender: PausedSender) -> JSON {
        object([
            ("app", .string(sender.app)), ("provider", .string(sender.provider)), ("destination", sender.destination.map { .string($0) } ?? .null),
            ("reason", .string(sender.reason)), ("since", .int(sender.since)), ("probeAt", .int(sender.probeAt)),
            ("instance", sender.instance.map { .string($0) }),
        ])
    }
}
