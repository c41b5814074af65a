import ArgumentParser
import Foundation
import PushCore
import PushJSON
import PushService

/// Where a running service answers, and its operations token: `--config` (its `http.host`,
/// `http.port` and `http.operationsToken`) or `--url` (the token from
/// `PUSHDISPATCH_HTTP_OPERATIONSTOKEN`).
struct ServiceAddressOptions: ParsableArguments {
    @Option(help: "The service's configuration file (its http.host, http.port and http.operationsToken are used).")
    var config: String?

    @Option(help: "The service's base URL, e.g. http://127.0.0.1:8080 (instead of --config; the token from PUSHDISPATCH_HTTP_OPERATIONSTOKEN).")
    var url: String?

    func validate() throws {
        if (config == nil) == (url == nil) { throw ValidationError("give --config FILE or --url URL") }
    }

    func resolve() throws -> (base: String, token: String?) {
        if let url {
            return (url, ProcessInfo.processInfo.environment["PUSHDISPATCH_HTTP_OPERATIONSTOKEN"].flatMap { $0.isEmpty ? nil : $0 })
        }
        let configuration = try loadConfiguration(config ?? "", purpose: .replay)
        return (StatusClient.baseURL(configuration), configuration.http.operationsToken?.value)
    }

    /// The JSON answer of `path` (a `POST` of `body` when given); exits 1 with the reason when
    /// there is none.
    func request(_ path: String, body: JSON? = nil) async throws -> (raw: [UInt8], json: JSON) {
        let (base, token) = try resolve()
        var bytes: [UInt8]?
        if let body {
            var writer = JSONWriter(capacity: 256)
            writer.write(body)
            bytes = writer.bytes
        }
        do {
            let raw = try await StatusClient.request(base: base, path: path, body: bytes, token: token)
            guard let json = try? JSONParser.parse(raw) else {
                printError("pushdispatch: \(base)\(path) did not answer JSON")
                throw ExitCode(1)
            }
            return (raw, json)
        } catch let error as StatusError {
            printError("pushdispatch: \(error)")
            throw ExitCode(1)
        }
    }
}

/// `app:seq` or `app/seq`.
func recordReference(_ text: String) throws -> (app: String, seq: Int64) {
    guard let separator = text.lastIndex(where: { $0 == ":" || $0 == "/" }), let seq = Int64(text[text.index(after: separator)...]), seq >= 0,
        separator > text.startIndex
    else { throw ValidationError("--record: expected APP:SEQ, e.g. toto:42, got \(text)") }
    return (String(text[..<separator]), seq)
}

func pathComponent(_ text: String) -> String {
    text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? text
}

func queryValue(_ text: String) -> String {
    text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~/"))) ?? text
}

struct HistoryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "What the service did: a subscription's delivery attempts, or what a record caused (SPEC §13).",
        discussion: """
            Reads the operations API of a running service. --subscription ID --app APP lists the \
            subscription's attempts, newest first (with --all, every page); --record APP:SEQ shows the \
            notifications the record caused with their attempts, and the subscriptions that got nothing \
            and why; --uid, --path or --token finds subscriptions (a device token is matched whole and \
            shown redacted). Exits 1 when the service cannot be reached or refuses.
            """
    )

    @OptionGroup var service: ServiceAddressOptions

    @Option(help: "A subscription's id (with --app).")
    var subscription: String?

    @Option(help: "The application (with --subscription, --uid, --path or --token).")
    var app: String?

    @Option(help: "A record: APP:SEQ.")
    var record: String?

    @Option(help: "Find subscriptions of this user.")
    var uid: String?

    @Option(help: "Find subscriptions of this path.")
    var path: String?

    @Option(help: "Find subscriptions of this device token (the whole token).")
    var token: String?

    @Option(help: "Items per page (1 to 500).")
    var limit: Int = 50

    @Flag(help: "Every page, not only the first.")
    var all = false

    @Flag(help: "Print the API's JSON instead of the table.")
    var json = false

    func validate() throws {
        let searching = uid != nil || path != nil || token != nil
        let modes = [subscription != nil, record != nil, searching].filter { $0 }.count
        guard modes == 1 else { throw ValidationError("give one of --subscription ID (with --app), --record APP:SEQ, or --uid/--path/--token") }
        if subscription != nil && app == nil { throw ValidationError("--subscription needs --app") }
        guard (1...500).contains(limit) else { throw ValidationError("--limit: 1 to 500") }
        if let record { _ = try recordReference(record) }
    }

    func run() async throws {
        if let record {
            let (app, seq) = try recordReference(record)
            let answer = try await service.request("/ops/v1/records/\(pathComponent(app))/\(seq)")
            print(json ? String(decoding: answer.raw, as: UTF8.self) : HistoryTable.fate(answer.json), terminator: json ? "\n" : "")
            return
        }
        var base: String
        if let subscription, let app {
            base = "/ops/v1/subscriptions/\(pathComponent(app))/\(pathComponent(subscription))/history?limit=\(limit)"
        } else {
            var query = ["limit=\(limit)"]
            if let app { query.append("app=\(queryValue(app))") }
            if let uid { query.append("uid=\(queryValue(uid))") }
            if let path { query.append("path=\(queryValue(path))") }
            if let token { query.append("token=\(queryValue(token))") }
            base = "/ops/v1/subscriptions?" + query.joined(separator: "&")
        }
        var cursor: String?
        repeat {
            let answer = try await service.request(base + (cursor.map { "&cursor=\($0)" } ?? ""))
            let items = answer.json["items"]?.arrayValue ?? []
            if json {
                print(String(decoding: answer.raw, as: UTF8.self))
            } else if subscription != nil {
                print(HistoryTable.attempts(items), terminator: "")
            } else {
                print(HistoryTable.subscriptions(items, first: cursor == nil), terminator: "")
            }
            cursor = answer.json["nextCursor"]?.stringValue
        } while all && cursor != nil
    }
}

struct SendersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "senders",
        abstract: "Paused senders of a running service: list them, resume one at once (SPEC §13).",
        subcommands: [List.self, Resume.self]
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The senders paused now, why and since when.")
        @OptionGroup var service: ServiceAddressOptions
        @Flag(help: "Print the API's JSON instead of the table.")
        var json = false

        func run() async throws {
            let answer = try await service.request("/ops/v1/senders")
            print(json ? String(decoding: answer.raw, as: UTF8.self) : HistoryTable.senders(answer.json["items"]?.arrayValue ?? []), terminator: json ? "\n" : "")
        }
    }

    struct Resume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Resume a paused sender now (after fixing its credentials or the webhook's receiver); exits 1 if it was not paused.")
        @OptionGroup var service: ServiceAddressOptions
        @Option(help: "The application.")
        var app: String
        @Option(help: "fcm, hms, apns, webpush or webhook.")
        var provider: String
        @Option(help: "The webhook's name (webhook only).")
        var destination: String?

        func run() async throws {
            var members: [(Key, JSON)] = [(Key("app"), .string(app)), (Key("provider"), .string(provider))]
            if let destination { members.append((Key("destination"), .string(destination))) }
            _ = try await service.request("/ops/v1/senders/resume", body: .object(JSONObject(members)))
            print("resumed \(app)/\(provider)\(destination.map { "/\($0)" } ?? "")")
        }
    }
}

struct RecoverCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recover",
        abstract: "Queue again the notifications discarded after the retry window since a time (SPEC §13).",
        discussion: """
            The notifications of APP discarded since --since (an ISO 8601 time such as 2026-11-27T00:00:00Z, \
            or milliseconds since the epoch), of one --provider and --destination if given, whose \
            subscription still exists, are queued again oldest first. Prints how many.
            """
    )

    @OptionGroup var service: ServiceAddressOptions
    @Option(help: "The application.")
    var app: String
    @Option(help: "Discarded at or after this time: ISO 8601, or milliseconds since the epoch.")
    var since: String
    @Option(help: "fcm, hms, apns, webpush or webhook.")
    var provider: String?
    @Option(help: "The webhook's name.")
    var destination: String?

    static func milliseconds(_ text: String) throws -> Int64 {
        if let value = Int64(text), value >= 0 { return value }
        let formatter = ISO8601DateFormatter()
        for options: ISO8601DateFormatter.Options in [[.withInternetDateTime, .withFractionalSeconds], [.withInternetDateTime]] {
            formatter.formatOptions = options
            if let date = formatter.date(from: text) { return Int64(date.timeIntervalSince1970 * 1_000) }
        }
        throw ValidationError("--since: expected an ISO 8601 time such as 2026-11-27T00:00:00Z or milliseconds since the epoch, got \(text)")
    }

    func validate() throws { _ = try Self.milliseconds(since) }

    func run() async throws {
        var members: [(Key, JSON)] = [(Key("app"), .string(app)), (Key("since"), .int(try Self.milliseconds(since)))]
        if let provider { members.append((Key("provider"), .string(provider))) }
        if let destination { members.append((Key("destination"), .string(destination))) }
        let answer = try await service.request("/ops/v1/recover", body: .object(JSONObject(members)))
        print("recovered \(answer.json["recovered"]?.integerValue ?? 0) notification(s)")
    }
}

/// Which dead letters (`deadletter list` and `redrive`): the API's filter.
struct DeadLetterFilterOptions: ParsableArguments {
    @Option(help: "Only those whose reason contains this text.")
    var reason: String?
    @Option(help: "Only the records of this application.")
    var app: String?
    @Option(help: "Refused at or after this time: ISO 8601, or milliseconds since the epoch.")
    var since: String?
    @Option(help: "Refused before this time: ISO 8601, or milliseconds since the epoch.")
    var until: String?

    func validate() throws { _ = try fields() }

    /// The filter's fields as the API names them (times in milliseconds).
    func fields() throws -> [(name: String, value: JSON)] {
        var fields: [(name: String, value: JSON)] = []
        if let reason { fields.append(("reason", .string(reason))) }
        if let app { fields.append(("app", .string(app))) }
        if let since { fields.append(("since", .int(try RecoverCommand.milliseconds(since)))) }
        if let until { fields.append(("until", .int(try RecoverCommand.milliseconds(until)))) }
        return fields
    }
}

struct DeadLetterCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deadletter",
        abstract: "The dead letters of a running service: the lines it refused, and why (SPEC §13).",
        subcommands: [List.self, Redrive.self]
    )

    struct Redrive: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check the dead letters again as the service now would; apply those now valid, once each, in their order.",
            discussion: """
                After a fix (ingest.maxRecordBytes raised, a new version), the refused lines that pass now are \
                applied whatever their source's watermark (they never were), each once: a second redrive \
                finds them redriven. Lines refused for their seq (a resend, out of order) are never applied. \
                --dry-run only counts.
                """)
        @OptionGroup var service: ServiceAddressOptions
        @OptionGroup var filter: DeadLetterFilterOptions
        @Flag(help: "Count what would be applied; apply nothing.")
        var dryRun = false

        func run() async throws {
            let members = [(Key("dryRun"), JSON.bool(dryRun))] + (try filter.fields()).map { (Key($0.name), $0.value) }
            let answer = try await service.request("/ops/v1/deadletter/redrive", body: .object(JSONObject(members)))
            let count = { (key: String) in answer.json[key]?.integerValue ?? 0 }
            print(
                "\(dryRun ? "would apply" : "applied") \(count("applied")), still refused \(count("refused")), redriven before \(count("alreadyRedriven")), "
                    + "refused for their seq (never redriven) \(count("notRedrivable"))")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The refused lines of this instance's dead-letter file, oldest first; the lines shown by their length, digest and start.")
        @OptionGroup var service: ServiceAddressOptions
        @OptionGroup var filter: DeadLetterFilterOptions
        @Flag(help: "Print the API's JSON instead of the table.")
        var json = false

        func run() async throws {
            let query = ["limit=500"] + (try filter.fields()).map { name, value in "\(name)=\(value.stringValue.map(queryValue) ?? value.description)" }
            var cursor: String?
            var first = true
            repeat {
                let answer = try await service.request("/ops/v1/deadletter?" + query.joined(separator: "&") + (cursor.map { "&cursor=\($0)" } ?? ""))
                if json {
                    print(String(decoding: answer.raw, as: UTF8.self))
                } else {
                    print(HistoryTable.deadLetters(answer.json["items"]?.arrayValue ?? [], first: first), terminator: "")
                }
                first = false
                cursor = answer.json["nextCursor"]?.stringValue
            } while cursor != nil
        }
    }
}
