import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// A leased connection, through which every query of the store goes.
///
/// PostgresNIO can lose a query: one written to a connection whose channel the server has just
/// closed (a restart, a failover) is dropped with nobody told, and its caller waits for ever
/// (vapor/postgres-nio#497; found by the PostgreSQL restart fault test: the socket intake hung
/// in a `BEGIN` sent at the moment the server went). So each query is sent from a task of its
/// own, and while it has no answer a watchdog looks at the connection every
/// ``watchInterval``: once it is closed, and the query has still not failed by itself within
/// ``closedGrace`` (a query that reached the connection fails at once when it closes), the
/// caller gets ``PostgresConnectionLost`` and goes on (retrying, as the store's callers do).
/// The abandoned task holds only the dead connection; PostgresNIO never ends it.
///
/// A query that reached the server and is merely slow is never abandoned: only a closed
/// connection ends the wait, and on a closed connection nothing can be answered any more.
struct PostgresSession: Sendable {
    let connection: PostgresConnection
    let logger: Logger

    static let watchInterval = TimeAmount.milliseconds(500)
    static let closedGrace = TimeAmount.seconds(1)

    /// Runs `query`, failing with ``PostgresConnectionLost`` when the connection closed under a
    /// query it never sent.
    @discardableResult
    func query(_ query: PostgresQuery, logger: Logger? = nil) async throws -> PostgresRowSequence {
        let connection = self.connection
        let logger = logger ?? self.logger
        let pending = PendingQuery()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                pending.start(continuation)
                // Unstructured on purpose: a lost query never ends, and the caller must not wait
                // for it (see the type's documentation).
                let sending = Task {
                    do {
                        pending.finish(.success(try await connection.query(query, logger: logger)))
                    } catch {
                        pending.finish(.failure(error))
                    }
                }
                pending.watch(connection, sending: sending)
            }
        } onCancel: {
            pending.cancel()
        }
    }

    /// `body` in a transaction: `BEGIN`, then `COMMIT` when it returns, `ROLLBACK` when it throws
    /// (its error is passed on as it is).
    nonisolated(nonsending) func withTransaction<T>(logger: Logger? = nil, _ body: (PostgresSession) async throws -> T) async throws -> T {
        try await query("BEGIN", logger: logger)
        let value: T
        do {
            value = try await body(self)
        } catch {
            _ = try? await query("ROLLBACK", logger: logger)
            throw error
        }
        try await query("COMMIT", logger: logger)
        return value
    }
}

/// A query waited for: answered once, by its sending task or by the watchdog.
final class PendingQuery: Sendable {
    private struct State {
        var continuation: CheckedContinuation<PostgresRowSequence, any Error>?
        var done = false
        var sending: Task<Void, Never>?
        var closedSince: NIODeadline?
        var timer: Scheduled<Void>?
    }

    private let state = Mutex(State())

    func start(_ continuation: CheckedContinuation<PostgresRowSequence, any Error>) {
        state.withLock { $0.continuation = continuation }
    }

    /// The answer (or the failure) of the query; the first of the two endings wins.
    func finish(_ result: Result<PostgresRowSequence, any Error>) {
        let (continuation, timer) = state.withLock { state -> (CheckedContinuation<PostgresRowSequence, any Error>?, Scheduled<Void>?) in
            defer {
                state.continuation = nil
                state.done = true
                state.timer = nil
                state.sending = nil
            }
            return (state.continuation, state.timer)
        }
        timer?.cancel()
        continuation?.resume(with: result)
    }

    /// Looks at the connection every ``PostgresSession/watchInterval`` until the query ends.
    func watch(_ connection: PostgresConnection, sending: Task<Void, Never>) {
        let timer = connection.eventLoop.scheduleTask(in: PostgresSession.watchInterval) { [self] in
            let now = NIODeadline.now()
            let lost = state.withLock { state -> Bool in
                guard !state.done, connection.isClosed else { return false }
                let since = state.closedSince ?? now
                state.closedSince = since
                return now - since >= PostgresSession.closedGrace
            }
            if lost {
                finish(.failure(PostgresConnectionLost()))
            } else if !state.withLock({ $0.done }) {
                watch(connection, sending: sending)
            }
        }
        let done = state.withLock { state -> Bool in
            if !state.done {
                state.timer = timer
                state.sending = sending
            }
            return state.done
        }
        if done { timer.cancel() }
    }

    /// The caller was cancelled: the sending task is told (PostgresNIO's query does not stop for
    /// it; the caller waits for its end as it always did).
    func cancel() {
        state.withLock { $0.sending }?.cancel()
    }
}

/// The connection closed and a query on it was never answered (PostgresNIO had lost it).
struct PostgresConnectionLost: Error, CustomStringConvertible {
    var description: String { "the connection was closed before the query was answered" }
}
