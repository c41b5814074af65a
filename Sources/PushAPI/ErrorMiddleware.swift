import Hummingbird
import Logging
import NIOCore

/// Turns every failure into a deliberate JSON error: an ``APIError`` as it is, a route that
/// does not exist as 404, an over-long body as 413; anything else is logged and answered 500.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            return try error.response(from: request, context: context)
        } catch is NIOTooManyBytesError {
            return try APIError.payloadTooLarge.response(from: request, context: context)
        } catch let error as HTTPError where error.status == .notFound {
            return try APIError.notFound("no such resource: \(request.method) \(request.uri.path)").response(from: request, context: context)
        } catch let error as HTTPError where error.status == .methodNotAllowed {
            return try APIError(.methodNotAllowed, "method_not_allowed", "\(request.method) is not allowed on \(request.uri.path)")
                .response(from: request, context: context)
        } catch {
            logger.error(
                "request failed", metadata: ["method": "\(request.method)", "path": "\(request.uri.path)", "error": "\(error)"])
            return try APIError.internalError.response(from: request, context: context)
        }
    }
}
