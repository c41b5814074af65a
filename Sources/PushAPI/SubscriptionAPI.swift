import Foundation
import Hummingbird
import Logging
import PushContracts
import PushCore
import PushJOSE
import PushJSON
import PushMatching

/// The subscription REST API (SPEC §5), plus `/.well-known/jwks.json`, `/openapi.json` and health.
///
///     POST   /datasync/v2/{app}/subscriptions/{uid}[?allowsUpdate=true]   create 201 / refresh 200 / 409 / remove 204
///     GET    /datasync/v2/{app}/subscriptions/{uid}                       list 200
///     GET    /datasync/v2/{app}/subscriptions/{uid}/{id}                  read 200 / 404
///     PUT    /datasync/v2/{app}/subscriptions/{uid}/{id}                  refresh the expiration 200 / remove 204 / 404
///     DELETE /datasync/v2/{app}/subscriptions/{uid}/{id}                  remove 204 / 404
public struct SubscriptionAPI: Sendable {
    /// Largest request body accepted (SPEC §11.10).
    public static let maxBodyBytes = 64 * 1024

    public let store: any SubscriptionStore
    public let applications: [String: APIApplication]
    /// What time it is (token lifetimes, expirations).
    public let clock: any ServiceClock
    /// Told after every committed change: the answer waits until the matching index has it
    /// (read-your-writes), so a record written after the answer is matched against it.
    public let index: any SubscriptionIndexFollower
    /// The public JWK Set of the service's signing keys.
    public let jwks: JSON
    /// Whether the service is ready (`/readyz`).
    public let readiness: any ReadinessProbe
    public let logger: Logger

    public init(
        store: any SubscriptionStore, applications: [String: APIApplication], clock: any ServiceClock, index: any SubscriptionIndexFollower,
        jwks: JSON, readiness: any ReadinessProbe = AlwaysReady(), logger: Logger
    ) {
        self.store = store
        self.applications = applications
        self.clock = clock
        self.index = index
        self.jwks = jwks
        self.readiness = readiness
        self.logger = logger
    }

    /// A router serving the API. Its errors are JSON (``ErrorMiddleware``), on every route
    /// added to it later too; a method a path does not serve is 405 once `served` has recorded
    /// the router's routes (``ServedPaths/record(_:)``).
    public func router(served: ServedPaths = ServedPaths()) -> Router<BasicRequestContext> {
        // HEAD wherever GET (RFC 9110 §9.3.2): the GET route's answer without its body.
        let router = Router(context: BasicRequestContext.self, options: .autoGenerateHeadEndpoints)
        router.add(middleware: ErrorMiddleware(logger: logger, served: served))
        let collection = "datasync/v2/:app/subscriptions/:uid"
        router.post(RouterPath(collection)) { request, context in try await create(request, context) }
        router.get(RouterPath(collection)) { request, context in try await list(request, context) }
        router.get(RouterPath(collection + "/:id")) { request, context in try await read(request, context) }
        router.put(RouterPath(collection + "/:id")) { request, context in try await refresh(request, context) }
        router.delete(RouterPath(collection + "/:id")) { request, context in try await remove(request, context) }
        router.get(".well-known/jwks.json") { _, _ in Response.json(jwks) }
        let document = ByteBuffer(string: OpenAPIDocument.json)
        router.get("openapi.json") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: document))
        }
        router.get("healthz") { _, _ in Response.json(["status": "ok"]) }
        router.get("readyz") { _, _ in
            if let problem = await readiness.problem() {
                return Response.json(status: .serviceUnavailable, problem)
            }
            return Response.json(["status": "ready"])
        }
        return router
    }

    // MARK: - Handlers

    func create(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let (application, uid, claims) = try await authorize(request, context)
        let allowsUpdate = try allowsUpdateParameter(request)
        let body = try await jsonBody(request, required: true)!
        let subscriptionRequest: SubscriptionRequest
        do {
            subscriptionRequest = try SubscriptionRequest.decode(body, app: application.id, uid: uid)
            try application.rules.check(subscriptionRequest)
        } catch {
            throw APIError.badRequest(error.message)
        }
        let tuple = subscriptionRequest.tuple(app: application.id, uid: uid)
        let id = SubscriptionID.derive(tuple)
        if subscriptionRequest.expiration == 0 {
            if try await store.remove(app: application.id, uid: uid, id: id) != nil { await index.catchUp() }
            return Response(status: .noContent)
        }
        let now = clock.nowSeconds
        let expiresAt: Int64
        do {
            expiresAt = try application.rules.lifetimes.expiration(requested: subscriptionRequest.expiration, now: now)
        } catch {
            throw APIError.badRequest(error.message)
        }
        try await checkAccess(application, uid: uid, path: tuple.path, claims: claims)
        let subscription = Subscription(
            id: id, tuple: tuple, mode: subscriptionRequest.mode, format: subscriptionRequest.format,
            encryption: subscriptionRequest.encryption, createdAt: now, expiresAt: expiresAt, auth: claims)
        switch try await store.save(subscription, allowUpdate: allowsUpdate, maxPerUser: application.rules.maxPerUser) {
        case .created(let created):
            await index.catchUp()
            return document(created, status: .created)
        case .refreshed(let refreshed):
            await index.catchUp()
            return document(refreshed, status: .ok)
        case .conflict(let existing):
            throw APIError.conflict(
                "this subscription exists already (id \(existing.id)); add ?allowsUpdate=true to refresh it")
        case .tooMany(let count):
            throw APIError(
                .tooManyRequests, .tooManySubscriptions,
                "\(quotedText(uid)) has \(count) subscriptions in \(quotedText(application.id)), the most subscriptions.maxPerUser allows; "
                    + "remove some (DELETE) or let them expire")
        }
    }

    func list(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let (application, uid, _) = try await authorize(request, context)
        let subscriptions = try await store.subscriptions(app: application.id, uid: uid)
        return Response.json(.array(subscriptions.map(\.document)))
    }

    func read(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let (application, uid, _) = try await authorize(request, context)
        let id = try parameter("id", context)
        guard let subscription = try await store.subscription(app: application.id, uid: uid, id: id) else {
            throw APIError.notFound("no subscription \(quotedText(id)) for this user")
        }
        return document(subscription, status: .ok)
    }

    func refresh(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let (application, uid, claims) = try await authorize(request, context)
        let id = try parameter("id", context)
        var requested: Int64?
        if let body = try await jsonBody(request, required: false) {
            do throws(RequestError) {
                let reader = try FieldReader(body, name: "body", allowed: ["expirationTimestampSeconds"])
                if let value = reader.value("expirationTimestampSeconds"), !value.isNull {
                    guard case .int(let seconds) = value, seconds >= 0 else {
                        throw RequestError(.invalid, "expirationTimestampSeconds: expected Unix seconds (a non-negative integer), or 0 to remove")
                    }
                    requested = seconds
                }
            } catch {
                throw APIError.badRequest(
                    "\(error.message); PUT refreshes the expiration only: to change a subscription, POST it with ?allowsUpdate=true")
            }
        }
        if requested == 0 {
            guard try await store.remove(app: application.id, uid: uid, id: id) != nil else {
                throw APIError.notFound("no subscription \(quotedText(id)) for this user")
            }
            await index.catchUp()
            return Response(status: .noContent)
        }
        let expiresAt: Int64
        do {
            expiresAt = try application.rules.lifetimes.expiration(requested: requested, now: clock.nowSeconds)
        } catch {
            throw APIError.badRequest(error.message)
        }
        guard let existing = try await store.subscription(app: application.id, uid: uid, id: id) else {
            throw APIError.notFound("no subscription \(quotedText(id)) for this user")
        }
        try await checkAccess(application, uid: uid, path: existing.path, claims: claims)
        guard let updated = try await store.updateExpiration(app: application.id, uid: uid, id: id, expiresAt: expiresAt, auth: claims) else {
            throw APIError.notFound("no subscription \(quotedText(id)) for this user")
        }
        if updated.auth != existing.auth { await index.catchUp() }
        return document(updated, status: .ok)
    }

    func remove(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let (application, uid, _) = try await authorize(request, context)
        let id = try parameter("id", context)
        guard try await store.remove(app: application.id, uid: uid, id: id) != nil else {
            throw APIError.notFound("no subscription \(quotedText(id)) for this user")
        }
        await index.catchUp()
        return Response(status: .noContent)
    }

    // MARK: - Helpers

    func document(_ subscription: Subscription, status: HTTPResponse.Status) -> Response {
        let location = "/datasync/v2/\(percentEncoded(subscription.app))/subscriptions/\(percentEncoded(subscription.uid))/\(subscription.id)"
        return Response.json(status: status, subscription.document, headers: [.contentLocation: location])
    }

    /// Refuses with 403 `permission_denied` unless the application's read rules let the token's
    /// user read `path` now (SPEC §12); the claims are what the subscription keeps.
    func checkAccess(_ application: APIApplication, uid: String, path: Path, claims: JSON) async throws {
        let size = claims.description.utf8.count
        guard size <= Subscription.maxAuthBytes else {
            throw APIError.badRequest(
                "the token's claims are \(size) bytes; a subscription keeps them to evaluate the read rules again, at most \(Subscription.maxAuthBytes)")
        }
        guard try await application.access.allows(path: path, auth: ReadRules.auth(uid: uid, claims: claims)) else {
            throw APIError(
                .forbidden, .permissionDenied,
                "the read rules of \(quotedText(application.id)) do not let \(quotedText(uid)) read \(quotedText(path.string))")
        }
    }

    /// The application and uid of the URL, and the token's verified claims, once the bearer
    /// token has been verified for them.
    ///
    /// The token is checked before the application is looked up, so that which applications
    /// exist cannot be learnt without credentials: for an unknown application the token is
    /// verified by every configured application's verifier; none accepts it → the 401 the first
    /// one gives (what a known application says of that token), one does → 404.
    func authorize(_ request: Request, _ context: BasicRequestContext) async throws -> (APIApplication, String, JSON) {
        let app = try parameter("app", context)
        let uid = try parameter("uid", context)
        if uid.isEmpty || uid.utf8.count > 256 || uid.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            throw APIError.badRequest("uid: 1 to 256 bytes without control characters")
        }
        guard let header = request.headers[.authorization] else {
            throw APIError.unauthorized("missing Authorization: Bearer <token>", invalidToken: false)
        }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw APIError.unauthorized("the Authorization header must be Bearer <token>", invalidToken: true)
        }
        let token = String(parts[1])
        let now = clock.nowSeconds
        guard let application = applications[app], utf8Equal(application.id, app) else {
            var firstError: String?
            for known in applications.keys.sorted() {
                guard let verifier = applications[known]?.verifier else { continue }
                do {
                    _ = try verifier.verify(token, now: now)
                } catch {
                    if firstError == nil { firstError = error.description }
                    continue
                }
                throw APIError.notFound("no application \(quotedText(app)) is configured")
            }
            throw APIError.unauthorized(firstError ?? "the token cannot be verified", invalidToken: true)
        }
        guard let verifier = application.verifier else {
            throw APIError.unauthorized("application \(quotedText(app)) has no authentication configured", invalidToken: true)
        }
        let subject: String
        let claims: JSON
        do {
            (subject, claims) = try verifier.verify(token, now: now)
        } catch {
            throw APIError.unauthorized(error.description, invalidToken: true)
        }
        // Byte equality: Swift's String == equates canonically equivalent texts ("K" and the
        // Kelvin sign), and the store does not.
        guard utf8Equal(subject, uid) else {
            throw APIError.forbidden("the token is for user \(quotedText(subject)), not \(quotedText(uid))")
        }
        return (application, uid, claims)
    }

    func parameter(_ name: String, _ context: BasicRequestContext) throws -> String {
        guard let raw = context.parameters.get(name) else { throw APIError.notFound("missing \(name)") }
        guard let decoded = raw.removingPercentEncoding else {
            throw APIError.badRequest("\(name): invalid percent-encoding")
        }
        // %00: no application, user or subscription id holds it (PostgreSQL's text cannot).
        guard !decoded.utf8.contains(0) else { throw APIError.badRequest("\(name): contains the character U+0000 (NUL)") }
        return decoded
    }

    func allowsUpdateParameter(_ request: Request) throws -> Bool {
        guard let value = request.uri.queryParameters.get("allowsUpdate") else { return false }
        switch value.lowercased() {
        case "true", "1": return true
        case "false", "0": return false
        default: throw APIError.badRequest("allowsUpdate: expected true or false, got \(quotedText(value))")
        }
    }

    /// The JSON body: 415 unless `application/json`, 413 beyond the limit, 400 if not JSON.
    /// `nil` when there is none and none is required.
    func jsonBody(_ request: Request, required: Bool) async throws -> JSON? {
        let buffer = try await request.body.collect(upTo: Self.maxBodyBytes)
        if buffer.readableBytes == 0 && !required { return nil }
        let contentType = request.headers[.contentType]?.lowercased() ?? ""
        let mediaType = contentType.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        guard mediaType == "application/json" else {
            throw APIError(
                .unsupportedMediaType, .unsupportedMediaType,
                "the body must be JSON with Content-Type: application/json\(contentType.isEmpty ? "" : ", not \(contentType)")")
        }
        do {
            // A repeated key is refused: which one counts would be a guess (issue 33).
            return try buffer.readableBytesView.withContiguousStorageIfAvailable { try JSONParser.parseRejectingDuplicateKeys($0) }
                ?? JSONParser.parseRejectingDuplicateKeys(Array(buffer.readableBytesView))
        } catch let error as JSONParseError {
            throw APIError.badRequest("the body is not valid JSON: \(error)")
        }
    }
}

func quotedText(_ text: String) -> String {
    JSONWriter.quoted(text)
}

func percentEncoded(_ text: String) -> String {
    text.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? text
}
