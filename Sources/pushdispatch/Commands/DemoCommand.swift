import ArgumentParser
import Logging
import PushDemo
import PushService

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Show the whole service working, with no credentials and no set-up.",
        discussion: """
            Starts the service on SQLite in a temporary folder, with fake FCM, HMS, OAuth and webhook \
            servers on loopback (HTTPS, HTTP/2). Registers sample subscriptions over the REST API, feeds \
            the change records of fixtures/demo/ through the queue file and the Unix socket, and prints \
            what each device and webhook received and why. Exits 0 when every step happened as expected.
            """
    )

    @Option(help: "Give up after this many seconds.")
    var timeout: Double = 50

    @Flag(help: "Keep the temporary folder (store, configuration, queue file) and print where it is.")
    var keep = false

    @Flag(help: "After the story, keep the service and the fake providers running and print the console's address and token (Ctrl-C stops).")
    var console = false

    func run() async throws {
        LoggingSystem.bootstrapStandardError(level: .error)
        let demo = try await Demo(keep: keep, timeout: timeout, console: console)
        if !(await demo.run()) { throw ExitCode(1) }
    }
}
