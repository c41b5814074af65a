import ArgumentParser
import Foundation
import PushDispatchClient

/// `--offline` and `--wait` of the commands that can go through the offline queue.
struct OfflineOptions: ParsableArguments {
    @Flag(help: "Queue the operation (offline queue) instead of sending it now: accepted whatever the network.")
    var offline = false

    @Option(help: "With --offline: how many seconds to wait for the service's answer before exiting (the operation stays queued).")
    var wait: Double = 0

    /// Prints the queued operation, waits up to `--wait` seconds for its outcome, prints it.
    func report(_ operation: QueuedOperation) async throws {
        print("queued \(operation)")
        let state = await QueueCommand.settle(operation, within: wait)
        print("\(operation.id): \(state)")
        if case .refused = state { throw ExitCode(1) }
    }
}

/// `queue`: what the offline queue holds; with `--wait`, sends it and reports each outcome.
struct QueueCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "queue",
        abstract: "Show the offline queue (--queue-file); with --wait, send what it holds and print each outcome.",
        discussion: "Exit status: 0 when the queue is empty at the end, 2 when operations remain, 1 on an error.")

    @OptionGroup var options: ClientOptions

    @Option(help: "Seconds to wait for the queue to empty (0: only list it).")
    var wait: Double = 0

    @Option(help: "Withdraw the queued operation of this id (never sent) and exit.")
    var cancel: String?

    @Flag(help: "Forget every queued operation (sign-out), and a queue file that cannot be read.")
    var discard = false

    func run() async throws {
        let push = try options.service()
        defer { withExtendedLifetime(push) {} }
        let queue = push.offline
        if discard {
            try await queue.discardAll()
            print("discarded")
            return
        }
        let waiting = try await queue.operations()
        if let cancel {
            guard let operation = waiting.first(where: { $0.id == cancel }) else { throw ValidationError("--cancel: no queued operation \(cancel)") }
            guard await operation.cancel() else {
                print("\(operation): not withdrawn (sent already, or a token update)")
                throw ExitCode(2)
            }
            print("\(operation): cancelled")
            return
        }
        for operation in waiting { print("\(operation): \(await operation.state())") }
        if wait > 0 {
            await queue.networkAvailable()
            let deadline = ContinuousClock.now + .milliseconds(Int64(wait * 1000))
            while ContinuousClock.now < deadline {
                let status = await queue.status()
                if status.pending == 0 || status.suspended != nil || status.storeError != nil { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            for operation in waiting { print("\(operation): \(await operation.state())") }
        }
        let status = await queue.status()
        print("queue: \(status)")
        if status.pending > 0 { throw ExitCode(2) }
    }

    /// `operation`'s state once final, or after `seconds`.
    static func settle(_ operation: QueuedOperation, within seconds: Double) async -> QueuedOperation.State {
        let deadline = ContinuousClock.now + .milliseconds(Int64(max(0, min(seconds, 86_400)) * 1000))
        var state = await operation.state()
        while !state.isFinal && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(50))
            state = await operation.state()
        }
        return state
    }
}
