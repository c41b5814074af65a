import PushCore
import PushDelivery
import PushHTTP
import PushJSON

extension FuzzTarget {
    /// `webpush`: browser push subscriptions (`WebPushContext`, PushCore) and what PushDelivery
    /// makes of them (the endpoint policy, the subscriber's keys). The first byte chooses how
    /// the rest is read: even, as a request's `context` (JSON: an object, or its text); odd, as
    /// a stored context's text. The endpoint is also taken from the rest as a plain URL.
    ///
    /// - A refusal: a message that is non-empty and bounded (the context, the endpoint policy,
    ///   the keys).
    /// - An accepted context's canonical text reads back to the same context and the same text.
    /// - The origin its sends are held by is the one the HTTP client's `RequestTarget` reads
    ///   (and VAPID signs for): `WebPushContext.origin(ofEndpoint:)` agrees with
    ///   `WebPushEndpointPolicy.origin(of: RequestTarget(url))` on every string.
    public static func webpush(_ data: UnsafeBufferPointer<UInt8>) throws(FuzzViolation) {
        var input = FuzzInput(data)
        let asStored = input.byte() % 2 == 1
        let rest = input.rest
        let text = String(decoding: rest, as: UTF8.self)
        try webPushOrigins(text)
        let context: WebPushContext
        do {
            if asStored {
                context = try WebPushContext(context: text)
            } else {
                guard let json = try? JSONParser.parse(rest) else { return }
                context = try WebPushContext(json)
            }
        } catch {
            try Check.message(error.description, "a Web Push context's error")
            return
        }
        let canonical = context.canonicalText
        switch Result(catching: { () throws(RequestError) in try WebPushContext(context: canonical) }) {
        case .success(let again):
            try Check.that(again == context, "a canonical context reads back to another one: \(Check.excerpt(canonical))")
            try Check.that(again.canonicalText == canonical, "a canonical context's text changes when read back: \(Check.excerpt(canonical))")
        case .failure(let error):
            throw FuzzViolation("a canonical context is refused (\(error)): \(Check.excerpt(canonical))")
        }
        try Check.that(WebPushContext.origin(context: canonical) == context.origin, "a stored context's origin differs from the context's")
        try webPushOrigins(context.endpoint)
        for policy in webPushPolicies {
            switch Result(catching: { () throws(WebPushEndpointPolicy.Refusal) in try policy.check(context.endpoint) }) {
            case .success(let target):
                try Check.that(target.secure, "the endpoint policy accepts an endpoint that is not https")
                try Check.that(context.origin == WebPushEndpointPolicy.origin(of: target), "the policy's target and the context disagree on the origin")
            case .failure(let error):
                try Check.message(error.description, "the endpoint policy's refusal")
            }
        }
        do {
            _ = try WebPushSubscriberKeys(p256dh: context.p256dh, auth: context.auth)
        } catch {
            try Check.message(error.description, "the subscriber keys' error")
        }
    }

    /// The endpoint policies an application may have: any public host; the usual push services.
    static let webPushPolicies = [
        WebPushEndpointPolicy(),
        WebPushEndpointPolicy(allowedHosts: ["fcm.googleapis.com", "*.push.services.mozilla.com", "web.push.apple.com", "*.notify.windows.com"]),
    ]

    /// The origin of an endpoint, as the context reads it and as the HTTP client does.
    static func webPushOrigins(_ endpoint: String) throws(FuzzViolation) {
        let ours = WebPushContext.origin(ofEndpoint: endpoint)
        let client = RequestTarget(endpoint).flatMap { $0.secure ? WebPushEndpointPolicy.origin(of: $0) : nil }
        try Check.that(ours == client, "the origin of \(Check.excerpt(endpoint)) is \(ours ?? "none") for the context, \(client ?? "none") for the HTTP client")
        if let ours {
            try Check.that(WebPushContext.origin(ofEndpoint: ours) == ours, "an origin's origin is not itself: \(Check.excerpt(ours))")
        }
    }
}
