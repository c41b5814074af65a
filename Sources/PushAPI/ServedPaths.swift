import HTTPTypes
import Hummingbird
import Synchronization

/// The paths a router serves and the methods of each: a request for a known path with a method
/// it does not serve (any method, `QUERY` and `TRACE` too) answers 405 with `Allow`, the
/// methods it does (RFC 9110 §15.5.6), not the 404 of an unknown resource. ``record(_:)``
/// takes the router's routes once they are all added; ``ErrorMiddleware`` asks on a 404.
public final class ServedPaths: Sendable {
    struct Served: Sendable {
        /// The path's segments; `nil` where any one segment matches (a `{parameter}`).
        var segments: [Substring?]
        var allow: String
    }

    let table = Mutex<[Served]>([])

    public init() {}

    /// Takes `router`'s routes (call again after adding more).
    public func record(_ router: Router<some RequestContext>) {
        var methods: [String: (path: RouterPath, methods: Set<HTTPRequest.Method>)] = [:]
        for route in router.routes {
            methods[route.path.description, default: (route.path, [])].methods.insert(route.method)
        }
        let order: [HTTPRequest.Method] = [.get, .head, .post, .put, .delete, .patch, .options]
        let served = methods.values.map { path, methods in
            var allowed = methods
            // Hummingbird answers HEAD from the GET route.
            if allowed.contains(.get) { allowed.insert(.head) }
            let allow = order.filter(allowed.contains) + allowed.filter { !order.contains($0) }.sorted { $0.rawValue < $1.rawValue }
            return Served(
                segments: path.components.map { component in
                    let text = component.description
                    return text.hasPrefix("{") && text.hasSuffix("}") ? nil : Substring(text)
                },
                allow: allow.map(\.rawValue).joined(separator: ", "))
        }
        table.withLock { $0 = served }
    }

    /// The `Allow` of `path` (as requested, before percent-decoding) when a route serves it.
    public func allow(_ path: String) -> String? {
        let segments = path.split(separator: "/", omittingEmptySubsequences: true)
        return table.withLock { table in
            table.first { served in
                served.segments.count == segments.count && zip(served.segments, segments).allSatisfy { expected, given in expected.map { $0 == given } ?? true }
            }?.allow
        }
    }
}
