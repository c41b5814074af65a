import ArgumentParser
import Foundation
import PushCore
import PushJSON
import PushService

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Summarise a running service: queue depth, oldest pending, deliveries, paused applications, ingest position.",
        discussion: """
            Reads GET /status of the service that --config describes (its http.host and http.port, and \
            http.operationsToken if set), or of --url (the token then from PUSHDISPATCH_HTTP_OPERATIONSTOKEN, \
            if set). Exits 1 when the service cannot be reached.
            """
    )

    @Option(help: "The service's configuration file (its http.host and http.port are used).")
    var config: String?

    @Option(help: "The service's base URL, e.g. http://127.0.0.1:8080 (instead of --config).")
    var url: String?

    @Flag(help: "Print the JSON document instead of the table.")
    var json = false

    func validate() throws {
        if (config == nil) == (url == nil) { throw ValidationError("give --config FILE or --url URL") }
    }

    func run() async throws {
        let base: String
        let token: String?
        if let url {
            base = url
            token = ProcessInfo.processInfo.environment["PUSHDISPATCH_HTTP_OPERATIONSTOKEN"].flatMap { $0.isEmpty ? nil : $0 }
        } else {
            let configuration = try loadConfiguration(config ?? "", purpose: .replay)
            base = StatusClient.baseURL(configuration)
            token = configuration.http.operationsToken?.value
        }
        let body: [UInt8]
        do {
            body = try await StatusClient.fetch(base: base, token: token)
        } catch {
            printError("pushdispatch: \(error)")
            throw ExitCode(1)
        }
        if json {
            print(String(decoding: body, as: UTF8.self))
            return
        }
        guard let document = try? JSONParser.parse(body) else {
            printError("pushdispatch: \(base)/status did not answer JSON")
            throw ExitCode(1)
        }
        print(StatusTable.render(document), terminator: "")
    }
}
