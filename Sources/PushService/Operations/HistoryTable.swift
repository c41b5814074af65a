import Foundation
import PushJSON

/// The operations API's answers as text for people (`pushdispatch history`, `senders list`):
/// one line per attempt, times in UTC, newest first as the API gives them.
public enum HistoryTable {
    /// `2026-11-27T00:31:02.113Z`.
    static func time(_ milliseconds: Int64?) -> String {
        guard let milliseconds else { return "-" }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1_000))
    }

    static func text(_ value: JSON?) -> String {
        switch value {
        case .string(let text)?: text
        case .int(let number)?: String(number)
        case .bool(let flag)?: String(flag)
        case .double(let number)?: String(number)
        default: "-"
        }
    }

    /// Attempts (the `items` of a history page).
    public static func attempts(_ items: [JSON]) -> String {
        guard !items.isEmpty else { return "no attempt recorded\n" }
        var lines = ["AT\tATTEMPT\tPROVIDER\tDESTINATION\tSEQ\tSTATUS\tLATENCY\tOUTCOME\tNEXT\tREASON\tSUBSCRIPTION"]
        for item in items {
            lines.append(
                [
                    time(item["at"]?.integerValue), text(item["attempt"]), text(item["provider"]), text(item["destination"]), text(item["seq"]),
                    text(item["status"]), item["latencyMs"].map { text($0) + "ms" } ?? "-", text(item["outcome"]), time(item["nextAt"]?.integerValue),
                    text(item["reason"]), text(item["subscription"]),
                ].joined(separator: "\t"))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// A record's fate (`GET /ops/v1/records/{app}/{seq}`).
    public static func fate(_ document: JSON) -> String {
        var out = "record \(text(document["app"])) seq \(text(document["seq"]))\n"
        let notifications = document["notifications"]?.arrayValue ?? []
        out += notifications.isEmpty ? "no notification\n" : ""
        for notification in notifications {
            out += "notification \(text(notification["notification"])) (\(text(notification["kind"])), \(text(notification["state"]))) "
                + "for subscription \(text(notification["subscription"]))\n"
            let attempts = notification["attempts"]?.arrayValue ?? []
            if !attempts.isEmpty {
                out += Self.attempts(attempts).split(separator: "\n").map { "  " + $0 }.joined(separator: "\n") + "\n"
            }
        }
        for skip in document["nothing"]?.arrayValue ?? [] {
            out += "nothing for subscription \(text(skip["subscription"])): \(text(skip["why"]))\n"
        }
        return out
    }

    /// Subscriptions found (`GET /ops/v1/subscriptions`): the device token redacted as the API
    /// gives it. `first`: the first page (an empty one says so).
    public static func subscriptions(_ items: [JSON], first: Bool = true) -> String {
        guard !items.isEmpty else { return first ? "no subscription found\n" : "" }
        var lines = first ? ["ID\tAPP\tUID\tPROVIDER\tPATH\tTOKEN\tLAST"] : []
        for item in items {
            let token = item["token"].map { "\(text($0["head"]))…\(text($0["tail"])) sha256:\(text($0["sha256"]))" } ?? "-"
            let last = item["lastAttempt"].flatMap { $0.isNull ? nil : $0 }
            lines.append(
                [
                    text(item["id"]), text(item["app"]), text(item["uid"]), text(item["provider"]), text(item["path"]), token,
                    last.map { "\(text($0["outcome"])) \(text($0["status"])) at \(time($0["at"]?.integerValue))" } ?? "none",
                ].joined(separator: "\t"))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Paused senders (`GET /ops/v1/senders`).
    public static func senders(_ items: [JSON]) -> String {
        guard !items.isEmpty else { return "no sender is paused\n" }
        var lines = ["APP\tPROVIDER\tDESTINATION\tSINCE\tPROBE\tREASON"]
        for item in items {
            lines.append(
                [
                    text(item["app"]), text(item["provider"]), text(item["destination"]), time(item["since"]?.integerValue),
                    time(item["probeAt"]?.integerValue), text(item["reason"]),
                ].joined(separator: "\t"))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Dead letters (`GET /ops/v1/deadletter`). `first`: the first page (an empty one says so).
    public static func deadLetters(_ items: [JSON], first: Bool = true) -> String {
        guard !items.isEmpty else { return first ? "no dead letter\n" : "" }
        var lines = first ? ["AT\tSOURCE\tPOSITION\tAPP\tSEQ\tBYTES\tSHA256\tREASON"] : []
        for item in items {
            lines.append(
                [
                    time(item["ts"]?.integerValue), text(item["source"]), text(item["position"]), text(item["app"]), text(item["seq"]),
                    text(item["line"]?["bytes"]), text(item["line"]?["sha256"]), text(item["reason"]),
                ].joined(separator: "\t"))
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
