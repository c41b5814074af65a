import Logging
import PostgresNIO
import PushCore

extension PostgresStore {
    /// The advisory lock that tells how a database is used: every instance of a shared
    /// deployment holds it shared, a single instance holds it alone.
    static let deploymentLock: Int64 = 0x7075_7368_5f64_6570  // "push_dep"

    /// Takes the deployment lock for this store's life (until ``close()``, or the process's
    /// end: PostgreSQL releases a session's locks when its connection goes). `shared`: one of
    /// several instances (others may hold it shared too); otherwise this process alone.
    /// Returns `false`, holding nothing, when the database is used the other way (or, alone,
    /// by another single instance).
    public func holdDeploymentLock(shared: Bool) async throws -> Bool {
        let function = shared ? "pg_try_advisory_lock_shared" : "pg_try_advisory_lock"
        let (answers, answer) = AsyncStream<Result<Bool, any Error>>.makeStream()
        let client = self.client
        let logger = self.logger
        let store = self
        // The lock lives as long as the session: one pooled connection is kept for it.
        Task {
            do {
                try await client.withConnection { connection in
                    let rows = try await PostgresSession(connection: connection, logger: logger).query("SELECT \(unescaped: function)(\(Self.deploymentLock))")
                    var taken = false
                    for try await value in rows.decode(Bool.self) { taken = value }
                    answer.yield(.success(taken))
                    guard taken else { return }
                    await withCheckedContinuation { continuation in
                        let closed = store.deploymentHold.withLock { hold -> Bool in
                            if !hold.closed { hold.waiter = continuation }
                            return hold.closed
                        }
                        if closed { continuation.resume() }
                    }
                    _ = try? await PostgresSession(connection: connection, logger: logger).query("SELECT pg_advisory_unlock_all()")
                }
            } catch {
                answer.yield(.failure(error))
            }
            answer.finish()
        }
        for await result in answers {
            switch result {
            case .success(let taken): return taken
            case .failure(let error): throw Self.storeError(error, subscriptionID: nil, location: location)
            }
        }
        return false
    }
}
