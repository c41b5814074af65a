import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import PushCore
import PushContracts

/// Turns every failure into a deliberate JSON error: an ``APIError`` as it is, a route that
/// does not exist as 404 (405 with `Allow` when its path is served with other methods), an
/// over-long body as 413; anything else is logged and answered 500.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger
    let served: ServedPaths

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            return try error.response(from: request, context: context)
        } catch is NIOTooManyBytesError {
            return try APIError.payloadTooLarge.response(from: request, context: context)
        } catch let error as HTTPError where error.status == .notFound {
            if let allow = served.allow(request.uri.path) {
                return try APIError(
                    .methodNotAllowed, .methodNotAllowed, "\(request.method.rawValue) is not allowed here; allowed: \(allow)", headers: [.allow: allow]
                ).response(from: request, context: context)
            }
            return try APIError.notFound("no such resource: \(request.method) \(quotedText(request.uri.path))")
                .response(from: request, context: context)
        } catch let error as StoreError {
            return try response(for: error, request, context)
        } catch let error as HTTPError where error.status == .methodNotAllowed {
            return try APIError(
                .methodNotAllowed, .methodNotAllowed,
                "\(quotedText(request.method.rawValue)) is not allowed on \(quotedText(request.uri.path))"
            ).response(from: request, context: context)
        } catch let error as HTTPError where (400..<500).contains(error.status.code) {
            return try APIError(error.status, .status(error.status), error.body ?? error.status.reasonPhrase)
                .response(from: request, context: context)
        } catch let error as HTTPParserError {
            // The body was not valid HTTP/1.1 (a malformed chunk): the client's fault.
            return try APIError.badRequest("the request body is not valid HTTP/1.1 (\(error))").response(from: request, context: context)
        } catch {
            logger.error(
                "request failed", metadata: ["method": "\(request.method)", "path": "\(request.uri.path)", "error": "\(error)"])
            return try APIError.internalError.response(from: request, context: context)
        }
    }

    /// A store failure as a deliberate answer: what the client can act on gets its status; the
    /// rest is logged and answered 500.
    func response(for error: StoreError, _ request: Request, _ context: Context) throws -> Response {
        switch error.kind {
        case .busy:
            return try APIError(
                .serviceUnavailable, .unavailable, "the store is busy; try again in a moment", headers: [.retryAfter: "1"]
            ).response(from: request, context: context)
        case .duplicate:
            return try APIError.conflict("a subscription with this id exists already").response(from: request, context: context)
        case .constraint:
            let constraint = error.detail ?? "a constraint"
            logger.warning("the store refused a write", metadata: ["constraint": "\(constraint)", "subscription": "\(error.subscriptionID ?? "-")"])
            return try APIError.badRequest("the subscription breaks a rule of the store: \(constraint)").response(from: request, context: context)
        default:
            logger.error(
                "store failure", metadata: ["method": "\(request.method)", "path": "\(request.uri.path)", "error": "\(error)"])
            return try APIError.internalError.response(from: request, context: context)
        }
    }
}
