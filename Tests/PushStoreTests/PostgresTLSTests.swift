import Foundation
import Logging
import PushCore
import PushContracts
@testable import PushStore
import PushTestSupport
import Testing

/// `sslmode` and `sslrootcert` against a real server: the TLS cluster of
/// ``PostgresTestServer/tls`` accepts only TLS over TCP, with a certificate for `localhost`
/// (DNS:localhost only) signed by a CA made for the run. The URLs carry a password the server
/// never asks for (trust): no message may repeat it.
@Suite("PostgreSQL over TLS (sslmode, sslrootcert)", .processLevel, .enabled(if: PostgresTestServer.tlsEnabled))
struct PostgresTLSTests {
    static let logger = Logger(label: "postgres-test", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A fresh database on `server`: its URL at `host`, with `query`.
    func url(_ query: String, host: String = "localhost", server: Result<PostgresTestServer, PostgresTestServerError> = PostgresTestServer.tls) throws
        -> String
    {
        let server = try server.get()
        let created = try #require(URLComponents(string: try server.createDatabase()))
        return "postgres://\(server.user):pw-secret@\(host):\(server.port)\(created.path)" + (query.isEmpty ? "" : "?" + query)
    }

    /// The TLS cluster's CA files.
    func certificates() throws -> PostgresTestServer.Certificates {
        try #require(try PostgresTestServer.tls.get().certificates)
    }

    /// Opens the store at `url`, and says whether its connection is encrypted (`pg_stat_ssl`).
    func encrypted(_ url: String) async throws -> Bool {
        let store = try await PostgresStore.open(url: url, logger: Self.logger)
        defer { store.close() }
        let rows = try await store.client.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", logger: Self.logger).collect()
        return try #require(rows.first).decode(Bool.self)
    }

    /// Why the store at `url` cannot be opened; never the password.
    func refusal(_ url: String) async -> String {
        do {
            let store = try await PostgresStore.open(url: url, logger: Self.logger)
            store.close()
            return "opened"
        } catch {
            #expect(!"\(error)".contains("pw-secret"), "\(error)")
            // The refusal itself, from the one connection made at open: not the pool's timeout
            // after its minute of retries. (No wall-clock bound: a loaded CI machine stalls.)
            #expect(!"\(error)".lowercased().contains("timeout") && !"\(error)".contains("did not answer in time"), "\(error)")
            #expect((error as? StoreError)?.kind == .unavailable, "\(error)")
            return "\(error)"
        }
    }

    @Test("verify-full with the CA, at the host name of the certificate: connected, encrypted")
    func verifyFull() async throws {
        let ca = try certificates().ca
        #expect(try await encrypted(try url("sslmode=verify-full&sslrootcert=\(ca)")))
        // sslrootcert alone: verify-full is not the default then, but the chain is verified.
        #expect(try await encrypted(try url("sslrootcert=\(ca)")))
    }

    @Test("verify-full at 127.0.0.1 is refused: the certificate names localhost only")
    func verifyFullWrongHost() async throws {
        let refusal = await refusal(try url("sslmode=verify-full&sslrootcert=\(try certificates().ca)", host: "127.0.0.1"))
        #expect(refusal.contains("store.postgres: the certificate of PostgreSQL at 127.0.0.1:"), "\(refusal)")
        #expect(refusal.contains("is not valid for 127.0.0.1 (sslmode=verify-full checks the host name)"), "\(refusal)")
    }

    @Test("verify-ca with the CA at 127.0.0.1: connected (the host name is not checked)")
    func verifyCAIgnoresHost() async throws {
        #expect(try await encrypted(try url("sslmode=verify-ca&sslrootcert=\(try certificates().ca)", host: "127.0.0.1")))
    }

    @Test("a chain that leads to another CA is refused by verify-ca, verify-full, and require given that CA")
    func otherCA() async throws {
        let other = try certificates().otherCA
        for mode in ["verify-ca", "verify-full", "require"] {
            let refusal = await refusal(try url("sslmode=\(mode)&sslrootcert=\(other)"))
            #expect(refusal.contains("store.postgres: the certificate of PostgreSQL at localhost:"), "\(mode): \(refusal)")
            #expect(refusal.contains("is not signed by a CA of sslrootcert=\(other) (sslmode=\(mode) verifies it)"), "\(mode): \(refusal)")
        }
    }

    @Test("verify-full with the system's roots is refused: the run's CA is not among them")
    func systemRoots() async throws {
        let refusal = await refusal(try url("sslrootcert=system"))
        #expect(refusal.contains("is not signed by a CA of the system's trust roots (sslmode=verify-full verifies it)"), "\(refusal)")
    }

    @Test("require without a CA: connected, encrypted, the certificate not verified (as libpq)")
    func requireWithoutCA() async throws {
        #expect(try await encrypted(try url("sslmode=require")))
        #expect(try await encrypted(try url("sslmode=require", host: "127.0.0.1")))
    }

    @Test("prefer, allow and no sslmode use TLS when the server offers it", arguments: ["", "sslmode=prefer", "sslmode=allow"])
    func preferUsesTLS(query: String) async throws {
        #expect(try await encrypted(try url(query)))
    }

    @Test("disable is refused by a server that accepts only TLS")
    func disableRefused() async throws {
        let refusal = await refusal(try url("sslmode=disable"))
        #expect(refusal.contains("store.postgres: cannot connect: PostgreSQL at localhost:"), "\(refusal)")
        #expect(refusal.contains("no encryption"), "\(refusal)")
        #expect(refusal.contains("the server accepts only TLS, which sslmode=disable never uses"), "\(refusal)")
    }

    /// (Not with `TEST_PUSHDISPATCH_POSTGRES`: that server may well offer TLS.)
    @Test(
        "a server without TLS: require is refused; prefer and no sslmode connect in clear",
        .enabled(if: PostgresTestServer.enabled && ProcessInfo.processInfo.environment["TEST_PUSHDISPATCH_POSTGRES"] == nil))
    func serverWithoutTLS() async throws {
        let server = PostgresTestServer.shared
        let refusal = await refusal(try url("sslmode=require", host: "127.0.0.1", server: server))
        #expect(refusal.contains("store.postgres: PostgreSQL at 127.0.0.1:"), "\(refusal)")
        #expect(refusal.contains("does not offer TLS, and sslmode=require requires it; expected a server with ssl = on"), "\(refusal)")
        #expect(try await !encrypted(try url("", host: "127.0.0.1", server: server)))
        #expect(try await !encrypted(try url("sslmode=prefer", host: "127.0.0.1", server: server)))
    }
}
