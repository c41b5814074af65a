import Foundation
import PostgresNIO

/// What a PostgreSQL server did for a benchmark: its statements (`pg_stat_statements`, when the
/// server loads it: `shared_preload_libraries = 'pg_stat_statements'` and `CREATE EXTENSION
/// pg_stat_statements` in the database) and, when it runs on this machine and its data folder
/// can be read, its CPU (the postmaster and every backend, live or gone).
struct PostgresServerStats {
    let client: PostgresClient
    /// The postmaster's process id; nil when the server is not on this machine or not readable.
    let postmaster: Int32?
    /// Whether `pg_stat_statements` can be read.
    let statements: Bool

    init(client: PostgresClient) async throws {
        self.client = client
        var folder = ""
        for try await value in try await client.query("SELECT setting FROM pg_settings WHERE name = 'data_directory'").decode(String.self) { folder = value }
        let first = (try? String(contentsOfFile: folder + "/postmaster.pid", encoding: .utf8))?.split(separator: "\n").first
        postmaster = first.flatMap { Int32($0) }
        var installed = false
        for try await _ in try await client.query("SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'").decode(Int.self) { installed = true }
        statements = installed
    }

    func reset() async throws {
        guard statements else { return }
        _ = try await client.query("SELECT pg_stat_statements_reset()")
    }

    func cpuMicroseconds() -> Int64? { postmaster.flatMap { ProcessCPU.treeMicroseconds(pid: $0) } }

    /// Statements and their execution time per delivery, the heaviest statements, and the
    /// server's CPU per delivery. The benchmark's own reads of the outbox's depth (`tally`, the
    /// oldest row) and these statistics' are left out.
    func report(deliveries: Int, serverCPU: Int64?) async throws {
        let per = Double(max(1, deliveries))
        if let serverCPU {
            print(String(format: "PostgreSQL server CPU: %.2f s = %.3f ms per delivery", Double(serverCPU) / 1e6, Double(serverCPU) / 1000 / per))
        } else {
            print("PostgreSQL server CPU: not measured (the server is not on this machine, or its data folder cannot be read)")
        }
        guard statements else {
            print("pg_stat_statements is not installed in this database: statements per delivery not measured")
            return
        }
        var rows: [(calls: Int64, milliseconds: Double, rows: Int64, text: String)] = []
        for try await (calls, time, count, text) in try await client.query(
            """
            SELECT calls, total_exec_time, rows, query FROM pg_stat_statements
            WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
            ORDER BY calls DESC
            """
        ).decode((Int64, Double, Int64, String).self) {
            let flat = text.split(whereSeparator: { $0 == "\n" || $0 == " " }).joined(separator: " ")
            if flat.contains("FROM tally") || flat.contains("created_at FROM notification ORDER BY id LIMIT") || flat.contains("pg_stat_statements")
                || flat.hasPrefix("BEGIN") && calls == 0
            {
                continue
            }
            rows.append((calls, time, count, flat))
        }
        let calls = rows.map(\.calls).reduce(0, +)
        let time = rows.map(\.milliseconds).reduce(0, +)
        print(String(format: "PostgreSQL statements: %d = %.2f per delivery; execution %.0f ms = %.3f ms per delivery", calls, Double(calls) / per, time, time / per))
        for row in rows.prefix(8) {
            print(String(format: "  %7d calls %8.0f ms %8d rows  %@", row.calls, row.milliseconds, row.rows, String(row.text.prefix(110))))
        }
    }
}
