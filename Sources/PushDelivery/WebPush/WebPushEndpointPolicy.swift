import PushHTTP

/// Which push resources a Web Push subscription may name.
///
/// A browser subscription's `endpoint` comes from the subscriber, not from the operator: left
/// unchecked, it would make the service POST to any URL it can reach (server-side request
/// forgery): its own admin ports on loopback, a cloud metadata address, hosts of the private
/// network. So an endpoint must be `https`, its host must be on the allow-list when one is
/// configured, and every address it resolves to must be a public one
/// (``AddressClass/isPublic(_:)``) unless the application allows private addresses (tests with
/// loopback fakes). The URL is checked when the subscription is made and before each send;
/// the addresses where the connection is made (``HTTP2Transport/Configuration/publicAddressesOnly``),
/// so that a name resolving elsewhere later (DNS rebinding) is still refused.
public struct WebPushEndpointPolicy: Sendable, Equatable {
    /// Host names the endpoint may have, lower case; `*.example.com` allows every name below
    /// `example.com` (not `example.com` itself). `nil`: any public host.
    public var allowedHosts: [String]?
    /// Whether endpoints may be (or resolve to) loopback, private, link-local and other
    /// non-public addresses. Default false; tests with fakes on loopback set it.
    public var allowPrivateAddresses: Bool

    public init(allowedHosts: [String]? = nil, allowPrivateAddresses: Bool = false) {
        self.allowedHosts = allowedHosts?.map { $0.lowercased() }
        self.allowPrivateAddresses = allowPrivateAddresses
    }

    /// Why an endpoint is refused.
    public struct Refusal: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// The endpoint as a request target, or why it is refused.
    public func check(_ endpoint: String) throws(Refusal) -> RequestTarget {
        guard let target = RequestTarget(endpoint) else {
            throw Refusal(description: "the endpoint is not an absolute URL (https://host/path, no user information or fragment)")
        }
        guard target.secure else { throw Refusal(description: "the endpoint must be an https URL") }
        let host = target.host.lowercased()
        if let allowedHosts, !allowedHosts.contains(where: { Self.matches(host, $0) }) {
            throw Refusal(description: "the push service \(AnswerClassifier.bounded(host, 100)) is not among the application's webpush.allowedHosts")
        }
        if !host.contains(":"), let last = host.split(separator: ".").last, last.allSatisfy({ $0.isASCII && $0.isNumber }) || last.hasPrefix("0x"),
            AddressClass.ipv4(host) == nil
        {
            // `2130706433`, `0177.1`, `0x7f.0.0.1`: numbers the resolver reads as addresses,
            // each its own way. No push service is named so.
            throw Refusal(description: "the endpoint's host \(AnswerClassifier.bounded(host, 64)) is a number but not an address in dotted decimal")
        }
        if !allowPrivateAddresses, let address = AddressClass.literal(host), !AddressClass.isPublic(address) {
            throw Refusal(description: "the endpoint's address \(AnswerClassifier.bounded(host, 64)) is not a public one (loopback, private or reserved)")
        }
        if !allowPrivateAddresses, host == "localhost" || host.hasSuffix(".localhost") {
            throw Refusal(description: "the endpoint's host \(AnswerClassifier.bounded(host, 64)) is this machine")
        }
        return target
    }

    static func matches(_ host: String, _ pattern: String) -> Bool {
        if pattern.hasPrefix("*.") {
            let suffix = pattern.dropFirst(1)  // ".example.com"
            return host.count > suffix.count && host.hasSuffix(suffix)
        }
        return host == pattern
    }

    /// The origin VAPID's `aud` names (RFC 8292 §2): `https://host`, with `:port` when it is
    /// not 443; IPv6 hosts in brackets.
    public static func origin(of target: RequestTarget) -> String {
        let host = target.host.contains(":") ? "[\(target.host.lowercased())]" : target.host.lowercased()
        return target.port == 443 ? "https://\(host)" : "https://\(host):\(target.port)"
    }

    /// Whether `pattern` is a usable allow-list entry: a host name, or `*.` and one.
    public static func isValidPattern(_ pattern: String) -> Bool {
        let name = pattern.hasPrefix("*.") ? String(pattern.dropFirst(2)) : pattern
        guard !name.isEmpty, name.utf8.count <= 253 else { return false }
        return name.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            !label.isEmpty && label.count <= 63 && label.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D }
        }
    }
}
