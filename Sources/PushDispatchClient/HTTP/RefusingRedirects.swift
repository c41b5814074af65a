import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A session delegate that follows no redirect: the REST API never redirects, and a redirect
/// followed would carry the bearer token to wherever it points. The 3xx answer itself is
/// returned, and refused as an answer the API does not give.
final class RefusingRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }

    /// An ephemeral session (no cookies, no cache) that follows no redirect.
    static func session() -> URLSession {
        URLSession(configuration: .ephemeral, delegate: RefusingRedirects(), delegateQueue: nil)
    }
}
