import Foundation
import PushFakes
import PushJSON

extension Demo {
    /// A burst to an FCM project whose quota is small (issue 34): the service paces to what
    /// FCM accepts instead of backing off, so the burst goes at the quota with few 429s.
    func pacing() async throws {
        let quota = 20
        let phones = 60
        say("\n9. Pacing: \(phones) phones subscribe to /users/alice/feed, and the fake FCM now takes \(quota) messages a second")
        say("   (beyond that: 429 QUOTA_EXCEEDED, Retry-After: 1). One record reaches all \(phones); FCM's budget is its default, 600000/min:")
        for index in 0..<phones {
            let body = Array(#"{"kind":"mobile","mode":"noData","path":"/users/alice/feed","context":"burst-\#(index)"}"#.utf8)
            let answer = try await request("/datasync/v2/toto/subscriptions/alice", method: .POST, body: body)
            guard answer.status == 201 else {
                throw DemoError("subscribing burst-\(index) answered \(answer.status): \(String(decoding: answer.body, as: UTF8.self))")
            }
        }
        fakes.setQuota(fcm: quota)
        defer { fakes.setQuota(fcm: nil) }
        let queueFile = folder.appendingPathComponent("changes.ndjson")
        let handle = try FileHandle(forWritingTo: queueFile)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data((#"{"seq":5,"app":"toto","op":"put","path":"/users/alice/feed","data":{"post":"hello, everyone"}}"# + "\n").utf8))
        try handle.close()
        let started = Date()
        func burst() -> [FakeProviders.Received] { fakes.received(provider: "fcm").filter { $0.target.hasPrefix("burst-") } }
        while burst().filter({ $0.status == 200 }).count < phones {
            guard Date().timeIntervalSince(started) < timeout else {
                failures.append("pacing: \(burst().filter { $0.status == 200 }.count) of \(phones) delivered within \(Int(timeout)) s")
                return
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        let requests = burst()
        let first = requests.map(\.at).min() ?? 0
        let last = requests.filter { $0.status == 200 }.map(\.at).max() ?? first
        let refused = requests.filter { $0.status == 429 }
        let refusedLater = refused.filter { $0.at - first >= 1_000 }.count
        let seconds = Double(last - first) / 1_000
        say("   \(phones) delivered in \(String(format: "%.1f", seconds)) s (at \(quota)/s, \(phones) take about \(phones / quota) s), in \(requests.count) requests:")
        say("   \(refused.count - refusedLater) refused (429) in the first second, before the pace came down, and \(refusedLater) after it.")
        say("   A back-off would have retried the refused ones 1, 2, 4, 8 s later, into the same quota.")
        if refusedLater > 5 { failures.append("pacing: \(refusedLater) requests refused after the first second (at most 5 expected)") }
        let overview = try await operations("/ops/v1/overview")
        let senders = (try? JSONParser.parse(overview.body))?["senders"]?.arrayValue ?? []
        if let fcm = senders.first(where: { $0["app"]?.stringValue == "toto" && $0["provider"]?.stringValue == "fcm" }), let pacing = fcm["pacing"], !pacing.isNull {
            say("   The operations overview's FCM sender now: pacing \(pacing)")
        } else {
            failures.append("pacing: the operations overview shows no pacing for toto's FCM sender")
        }
    }
}
