import PushDelivery
import PushHTTP
import PushJSON

extension FuzzTarget {
    /// `provider`: what the providers answer (PushDelivery's `AnswerClassifier`, SPEC §8). The
    /// first byte chooses the classifier (FCM, HMS, APNs, Web Push, webhook, Push Kit v3, OAuth token
    /// endpoint), the next two the HTTP status, the next one the length of a `Retry-After`
    /// value that follows (255: none); the rest is the body.
    ///
    /// - Every answer gets an outcome whose reason is non-empty and bounded.
    /// - The reason of an answered outcome tells its status back (`DeliveryOutcome.status`,
    ///   what the delivery history stores), for statuses of three digits.
    /// - A retry never asks to wait before now; an OAuth token is non-empty, at most 8 KiB, and
    ///   lives 0 to 86,400 seconds.
    /// - `RetryAfter.parse` of the value never traps, and reads an HTTP date it wrote
    ///   (`RetryAfter.format`) back to the same second.
    public static func provider(_ data: UnsafeBufferPointer<UInt8>) throws(FuzzViolation) {
        var input = FuzzInput(data)
        let kind = input.byte() % 7
        let status = Int(input.byte()) << 8 | Int(input.byte())
        let retryLength = Int(input.byte())
        var retryAfter: String?
        if retryLength != 255 {
            var header: [UInt8] = []
            for _ in 0..<retryLength { header.append(input.byte()) }
            retryAfter = String(decoding: header, as: UTF8.self)
        }
        let answer = ProviderAnswer(status: status, retryAfter: retryAfter, body: input.rest)
        let now: Int64 = 1_700_000_000_000
        let outcome: DeliveryOutcome
        switch kind {
        case 0: outcome = AnswerClassifier.fcm(answer, now: now)
        case 1: outcome = AnswerClassifier.hms(answer, token: "fuzz-token", now: now)
        case 2: outcome = AnswerClassifier.apns(answer, now: now)
        case 3: outcome = AnswerClassifier.webPush(answer, now: now)
        case 4: outcome = AnswerClassifier.webhook(answer, now: now)
        case 5: outcome = AnswerClassifier.harmony(answer, token: "fuzz-token", now: now)
        default:
            switch AnswerClassifier.oauth(answer, now: now) {
            case .success(let token):
                try Check.that(!token.token.isEmpty && token.token.utf8.count <= 8_192, "an access token of \(token.token.utf8.count) bytes")
                try Check.that((0...86_400).contains(token.expiresIn), "an access token living \(token.expiresIn) s")
            case .failure(.retry(let reason, let retryAfter)):
                try Check.message(reason, "an OAuth failure's reason")
                if let retryAfter { try Check.that(retryAfter >= now || isDate(answer.retryAfter), "Retry-After \(retryAfter) before now") }
            case .failure(.credentials(let reason)):
                try Check.message(reason, "an OAuth failure's reason")
            }
            try retryAfterRoundTrip(answer.retryAfter)
            return
        }
        try Check.message(outcome.reason, "a provider answer's outcome")
        if case .delivered = outcome {
        } else if (100...999).contains(status), outcome.reason.hasPrefix("HTTP ") {
            try Check.that(outcome.status == status, "the outcome of a \(status) answer reads back status \(outcome.status.map { "\($0)" } ?? "none"): \(Check.excerpt(outcome.reason))")
        }
        if case .retry(_, let at?, _) = outcome {
            // Seconds wait from now; a date is absolute (and may be past: then no wait).
            try Check.that(at >= now || isDate(answer.retryAfter), "Retry-After \(Check.excerpt(answer.retryAfter ?? "")) read as \(at), before now")
        }
        try retryAfterRoundTrip(answer.retryAfter)
    }

    /// Whether a `Retry-After` value is not a number of seconds (so it is an HTTP date).
    static func isDate(_ value: String?) -> Bool {
        guard let value else { return false }
        return !value.fuzzTrimmed().utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    /// `RetryAfter.parse` on the value, and on the HTTP date of a second derived from it.
    static func retryAfterRoundTrip(_ value: String?) throws(FuzzViolation) {
        _ = RetryAfter.parse(value, now: 1_700_000_000_000)
        var seconds: Int64 = 0
        for byte in (value ?? "").utf8 { seconds = (seconds &* 31 &+ Int64(byte)) & 0xFF_FFFF_FFFF }
        seconds %= 253_402_300_800  // 1970 to 9999
        let date = RetryAfter.format(seconds: seconds)
        try Check.that(RetryAfter.parse(date, now: 0) == seconds * 1_000, "RetryAfter reads \(date) (\(seconds) s) as \(RetryAfter.parse(date, now: 0).map { "\($0)" } ?? "nothing")")
    }
}

extension String {
    /// Without leading and trailing spaces and tabs (as `RetryAfter` reads a value).
    func fuzzTrimmed() -> Substring {
        var text = Substring(self)
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return text
    }
}
