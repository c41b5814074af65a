import PushCore
import PushJOSE
import PushTestSupport
import Testing
@testable import PushDelivery
@testable import PushHTTP

/// Which push resources a browser subscription may name (issue 24: the endpoint comes from the
/// subscriber, so it is a server-side request forgery vector), and the APNs body.
@Suite("Web Push endpoints: the SSRF policy; the APNs body")
struct WebPushEndpointPolicyTests {
    struct Row: CustomTestStringConvertible, Sendable {
        var endpoint: String
        var policy: WebPushEndpointPolicy
        /// `nil`: accepted; else a fragment of the refusal.
        var refusal: String?
        var testDescription: String { endpoint.prefix(60) + (refusal == nil ? " accepted" : " refused") }
    }

    static let open = WebPushEndpointPolicy()
    static let listed = WebPushEndpointPolicy(allowedHosts: ["fcm.googleapis.com", "*.push.services.mozilla.com", "web.push.apple.com"])
    static let loopback = WebPushEndpointPolicy(allowPrivateAddresses: true)

    static let rows: [Row] = [
        Row(endpoint: "https://fcm.googleapis.com/fcm/send/abc:APA91b", policy: open, refusal: nil),
        Row(endpoint: "https://fcm.googleapis.com/fcm/send/abc", policy: listed, refusal: nil),
        Row(endpoint: "https://updates.push.services.mozilla.com/wpush/v2/gAAAA", policy: listed, refusal: nil),
        Row(endpoint: "https://push.services.mozilla.com/wpush", policy: listed, refusal: "allowedHosts"),
        Row(endpoint: "https://evil.example/push", policy: listed, refusal: "allowedHosts"),
        Row(endpoint: "https://WEB.PUSH.APPLE.COM/QGuQyavXutnMH", policy: listed, refusal: nil),
        Row(endpoint: "http://fcm.googleapis.com/fcm/send/abc", policy: open, refusal: "https"),
        Row(endpoint: "ftp://fcm.googleapis.com/x", policy: open, refusal: "absolute URL"),
        Row(endpoint: "https://user:pass@fcm.googleapis.com/x", policy: open, refusal: "absolute URL"),
        Row(endpoint: "https://127.0.0.1:8443/push", policy: open, refusal: "not a public one"),
        Row(endpoint: "https://127.0.0.1:8443/push", policy: loopback, refusal: nil),
        Row(endpoint: "https://localhost:8443/push", policy: open, refusal: "this machine"),
        Row(endpoint: "https://localhost:8443/push", policy: loopback, refusal: nil),
        Row(endpoint: "https://169.254.169.254/latest/meta-data", policy: open, refusal: "not a public one"),
        Row(endpoint: "https://10.0.0.7/push", policy: open, refusal: "not a public one"),
        Row(endpoint: "https://192.168.1.1/push", policy: open, refusal: "not a public one"),
        Row(endpoint: "https://172.20.0.1/push", policy: open, refusal: "not a public one"),
        Row(endpoint: "https://[::1]/push", policy: open, refusal: "not a public one"),
        Row(endpoint: "https://[::ffff:127.0.0.1]/push", policy: open, refusal: "not a public one"),
        Row(endpoint: "https://[fd00::1]/push", policy: open, refusal: "not a public one"),
        Row(endpoint: "https://[fe80::1]/push", policy: open, refusal: "not a public one"),
        Row(endpoint: "https://[2a00:1450:4007:80e::200a]/push", policy: open, refusal: nil),
        Row(endpoint: "https://8.8.8.8/push", policy: open, refusal: nil),
        Row(endpoint: "https://2130706433/push", policy: open, refusal: "dotted decimal"),
        Row(endpoint: "https://0177.0.0.1/push", policy: loopback, refusal: "dotted decimal"),
        Row(endpoint: "https://0x7f.0.0.1/push", policy: open, refusal: "dotted decimal"),
    ]

    @Test("endpoints: https only, the allow-list, no private address", arguments: rows)
    func policy(row: Row) {
        do throws(WebPushEndpointPolicy.Refusal) {
            _ = try row.policy.check(row.endpoint)
            #expect(row.refusal == nil, "accepted, expected a refusal containing \(row.refusal ?? "")")
        } catch {
            #expect(row.refusal.map { error.description.contains($0) } ?? false, "\(error.description)")
        }
    }

    @Test("public and non-public addresses", arguments: [
        ("8.8.8.8", true), ("1.1.1.1", true), ("100.63.255.255", true), ("100.64.0.1", false), ("100.127.255.255", false),
        ("0.0.0.0", false), ("10.1.2.3", false), ("127.0.0.1", false), ("127.255.255.255", false), ("169.254.169.254", false),
        ("172.15.0.1", true), ("172.16.0.1", false), ("172.31.255.255", false), ("172.32.0.1", true), ("192.168.0.1", false),
        ("192.0.2.1", false), ("198.18.0.1", false), ("198.51.100.7", false), ("203.0.113.9", false), ("224.0.0.1", false),
        ("255.255.255.255", false), ("::", false), ("::1", false), ("::127.0.0.1", false), ("::ffff:10.0.0.1", false),
        ("::ffff:8.8.8.8", true), ("64:ff9b::7f00:1", false), ("64:ff9b::808:808", true), ("fc00::1", false), ("fdff::1", false),
        ("fe80::1", false), ("fec0::1", false), ("ff02::1", false), ("2001:db8::1", false), ("2001:4860:4860::8888", true),
        ("2a00:1450:4007:80e::200a", true),
        // Forms that embed an IPv4 address (issue 33): judged by it, or refused as a whole.
        ("192.88.99.1", false),  // the 6to4 relay anycast range (deprecated, RFC 7526)
        ("2002:a9fe:a9fe::1", false), ("2002:7f00:1::1", false), ("2002:0808:0808::1", true),  // 6to4: 169.254.169.254, 127.0.0.1, 8.8.8.8
        ("64:ff9b:1::a9fe:a9fe", false), ("64:ff9b:1::808:808", false),  // local-use NAT64 (RFC 8215): never a public destination
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", false),  // Teredo (2001::/32): tunnels, not destinations
    ])
    func addresses(text: String, isPublic: Bool) throws {
        let bytes = try #require(AddressClass.literal(text), "\(text) did not parse")
        #expect(AddressClass.isPublic(bytes) == isPublic, "\(text)")
    }

    @Test("address literals parse or are names", arguments: [
        ("1.2.3.4", [1, 2, 3, 4] as [UInt8]?), ("256.1.1.1", nil), ("1.2.3", nil), ("01.2.3.4", nil), ("0.0.0.0", [0, 0, 0, 0]), ("2130706433", nil),
        ("::", [UInt8](repeating: 0, count: 16)), ("::1", [UInt8](repeating: 0, count: 15) + [1]), ("1::2::3", nil), (":::", nil),
        ("1:2:3:4:5:6:7:8:9", nil), ("example.com", nil), ("::ffff:1.2.3.4", [UInt8](repeating: 0, count: 10) + [0xFF, 0xFF, 1, 2, 3, 4]),
        ("12345::", nil),
    ])
    func literals(text: String, expected: [UInt8]?) {
        #expect(AddressClass.literal(text) == expected, "\(text)")
    }

    @Test("seeded mutations of endpoints and address literals: refused with a bounded reason or accepted consistently, never a crash", arguments: [1, 2, 3] as [UInt64])
    func mutations(seed: UInt64) {
        var mutator = Mutator(seed: seed)
        let endpoints = [
            "https://fcm.googleapis.com/fcm/send/abc:APA91b", "https://[2a00:1450:4007:80e::200a]:8443/p", "https://10.0.0.7/push",
            "https://updates.push.services.mozilla.com/wpush/v2/gAAAA", "https://[::ffff:127.0.0.1]/push",
        ]
        let policies = [Self.open, Self.listed, Self.loopback]
        for round in 0..<10_000 {
            let endpoint = String(decoding: mutator.mutateBytes(Array(endpoints[round % endpoints.count].utf8)), as: UTF8.self)
            let policy = policies[round % policies.count]
            do throws(WebPushEndpointPolicy.Refusal) {
                let target = try policy.check(endpoint)
                #expect(target.secure && !target.host.isEmpty, "\(endpoint)")
                if !policy.allowPrivateAddresses, let address = AddressClass.literal(target.host.lowercased()) {
                    #expect(AddressClass.isPublic(address), "\(endpoint) accepted with a non-public address")
                }
                _ = WebPushEndpointPolicy.origin(of: target)
            } catch {
                #expect(!error.description.isEmpty && error.description.utf8.count <= 400, "\(endpoint)")
            }
            let host = String(decoding: mutator.mutateBytes(Array(["::1", "192.168.1.1", "2001:db8::1", "1.2.3.4", "::ffff:10.1.2.3"][round % 5].utf8)), as: UTF8.self)
            if let bytes = AddressClass.literal(host) { #expect(bytes.count == 4 || bytes.count == 16, "\(host)") }
        }
    }

    @Test("VAPID's aud is the endpoint's origin: the default port left out, IPv6 in brackets")
    func origins() throws {
        for (url, origin) in [
            ("https://fcm.googleapis.com/fcm/send/x", "https://fcm.googleapis.com"), ("https://Push.Example.net:443/a", "https://push.example.net"),
            ("https://localhost:8443/push/a", "https://localhost:8443"), ("https://[::1]:9443/p", "https://[::1]:9443"),
        ] {
            #expect(WebPushEndpointPolicy.origin(of: try #require(RequestTarget(url))) == origin)
            #expect(WebPushContext.origin(ofEndpoint: url) == origin)
        }
    }

    @Test("the destination a Web Push entry is held by is the origin VAPID signs for, on seeded mutations of endpoints too (issue 33)", arguments: [4, 5] as [UInt64])
    func destinationIsTheOrigin(seed: UInt64) throws {
        var mutator = Mutator(seed: seed)
        let valid = [
            "https://fcm.googleapis.com/fcm/send/abc:APA91b", "https://updates.push.services.mozilla.com/wpush/v2/gAAAA",
            "https://web.push.apple.com/QGuQyavXut", "https://[2001:db8::1]:8443/p?x=1", "https://h.example:0443/x", "https://H.EXAMPLE",
        ]
        for index in 0..<2_000 {
            let url = String(decoding: mutator.mutateBytes(Array(valid[index % valid.count].utf8)), as: UTF8.self)
            let expected = RequestTarget(url).flatMap { $0.secure ? WebPushEndpointPolicy.origin(of: $0) : nil }
            #expect(WebPushContext.origin(ofEndpoint: url) == expected, "\(url.prefix(120).debugDescription)")
        }
    }

    @Test("a bracketed host without a colon is no IPv6 address: both readers refuse it (found by the webpush fuzzer)")
    func bracketedHostWithoutColon() {
        for url in ["https://[2001]:8443/p?x=43/p?x=1\"\"", "https://[abc]/p", "https://[1.2.3.4]/p"] {
            #expect(RequestTarget(url) == nil, "\(url)")
            #expect(WebPushContext.origin(ofEndpoint: url) == nil, "\(url)")
        }
    }

    @Test("allow-list entries: host names or *. and a domain")
    func patterns() {
        for good in ["fcm.googleapis.com", "*.notify.windows.com", "localhost", "a-b.example"] { #expect(WebPushEndpointPolicy.isValidPattern(good), "\(good)") }
        for bad in ["", "*", "*.", "https://fcm.googleapis.com", "a..b", "exa mple.com", "*.*.example.com", String(repeating: "a", count: 64) + ".com"] {
            #expect(!WebPushEndpointPolicy.isValidPattern(bad), "\(bad)")
        }
    }

    @Test("the connection refuses a name that resolves to a non-public address, even when the URL passed the policy")
    func resolutionRefused() async throws {
        #expect(throws: PublicAddressResolver.Refused.self) { try PublicAddressResolver.firstPublic(host: "localhost", port: 443) }
        #expect(throws: PublicAddressResolver.Refused.self) { try PublicAddressResolver.firstPublic(host: "2130706433", port: 443) }
        let transport = try HTTP2Transport(configuration: .init(publicAddressesOnly: true), fallback: try HTTP1Transport(), ownsFallback: true)
        do {
            _ = try await transport.send(OutgoingRequest(url: "https://localhost:9/push", headers: [], body: []), timeout: .seconds(5))
            Issue.record("a loopback connection was made")
        } catch {
            #expect(error.description.contains("not public") && !error.lostInTransit, "\(error.description)")
        }
        do {
            _ = try await transport.send(OutgoingRequest(url: "http://127.0.0.1:9/push", headers: [], body: []), timeout: .seconds(5))
            Issue.record("a loopback request went through the fallback")
        } catch {
            #expect(error.description.contains("not public"), "\(error.description)")
        }
        try await transport.shutdown()
    }

    @Test("the APNs body: aps first with content-available, the data map's members beside it, 30 bytes more")
    func apnsBody() {
        let data = #"{"srv":"webcom","evt":"x.y.z","ver":"v2"}"#
        let body = String(decoding: ProviderMessages.apns(data: Array(data.utf8)), as: UTF8.self)
        #expect(body == #"{"aps":{"content-available":1},"srv":"webcom","evt":"x.y.z","ver":"v2"}"#)
        #expect(body.utf8.count == data.utf8.count + PayloadLimit.apnsOverhead)
        #expect(String(decoding: ProviderMessages.apns(data: Array("{}".utf8)), as: UTF8.self) == #"{"aps":{"content-available":1}}"#)
        // The largest data map the §7.4 rule lets through makes a body within APNs's 4,096 bytes.
        #expect(PayloadLimit.bytes - 1 + PayloadLimit.apnsOverhead <= 4_096)
        #expect(PayloadLimit.webPushBytes == WebPushEncryption.maximumPlaintext + 1)
    }

    @Test("VAPID private keys: PEM or base64url raw; anything else refused without echoing it")
    func vapidKeys() throws {
        let key = VAPIDKey(privateKey: .init())
        let pem = key.privateKey.pemRepresentation
        #expect(try VAPIDKey(text: pem).publicKeyText == key.publicKeyText)
        #expect(try VAPIDKey(text: Base64URL.encodeToString(key.privateKey.rawRepresentation) + "\n").publicKeyText == key.publicKeyText)
        for bad in ["not a key", Base64URL.encodeToString([UInt8](repeating: 0, count: 32)), "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"] {
            do throws(VAPIDKey.Invalid) {
                _ = try VAPIDKey(text: bad)
                Issue.record("accepted \(bad)")
            } catch {
                #expect(!error.description.contains(bad))
            }
        }
    }
}
