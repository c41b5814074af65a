import ArgumentParser
import PushCore
import PushService
import PushStore

struct SubscriptionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscriptions",
        abstract: "Inspect and remove subscriptions in the configured store (operators).",
        discussion: """
            Works beside a running service: a removal reaches its matching index within a second (the store \
            logs every change and the service follows the log).
            """,
        subcommands: [List.self, Show.self, Remove.self]
    )

    struct Options: ParsableArguments {
        @Option(help: "Configuration file (YAML or JSON): its store is used.")
        var config: String

        func store() async throws -> any RuntimeStore {
            let configuration = try loadConfiguration(config)
            do {
                return try await ServiceRuntime.openStore(configuration)
            } catch let error as ConfigurationError {
                reportConfigurationProblems(error, path: config)
                throw ExitCode(2)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print subscription documents, one JSON object per line.")

        @OptionGroup var options: Options
        @Option(help: "Only this application.") var app: String?
        @Option(help: "Only this user (requires --app).") var uid: String?

        func run() async throws {
            let store = try await options.store()
            var output = OutputBuffer(descriptor: 1)
            func emit(_ subscriptions: [Subscription]) throws {
                for subscription in subscriptions {
                    output.bytes += Array(subscription.document.description.utf8) + [UInt8(ascii: "\n")]
                }
                try output.flush()
            }
            if let uid {
                guard let app else { throw ValidationError("--uid needs --app") }
                try emit(try await store.subscriptions(app: app, uid: uid))
                return
            }
            var after: Int64 = 0
            while true {
                let page = try await store.subscriptions(app: app, after: after, limit: 1_000)
                guard let last = page.last else { break }
                try emit(page)
                after = last.handle ?? after
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print one subscription document.")

        @OptionGroup var options: Options
        @Argument(help: "Subscription id.") var id: String

        func run() async throws {
            guard let subscription = try await options.store().subscription(id: id) else {
                throw ValidationError("no subscription \(id)")
            }
            print(subscription.document.description)
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a subscription (no revoke notification is sent); print it.")

        @OptionGroup var options: Options
        @Argument(help: "Subscription id.") var id: String

        func run() async throws {
            let store = try await options.store()
            guard let subscription = try await store.subscription(id: id),
                let removed = try await store.remove(app: subscription.app, uid: subscription.uid, id: id)
            else {
                throw ValidationError("no subscription \(id)")
            }
            print(removed.document.description)
        }
    }
}
