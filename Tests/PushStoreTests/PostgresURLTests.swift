import Foundation
import PushCore
import PushContracts
@testable import PushStore
import PushFakes
import PushTestSupport
import Testing

/// The PostgreSQL URL of `store.postgres` comes from an operator: any text gives a client
/// configuration or a clear refusal that does not echo the password; `sslmode` and
/// `sslrootcert` mean what they mean to libpq.
@Suite("PostgreSQL URL parsing")
struct PostgresURLTests {
    /// A CA certificate in PEM (the fake providers' test CA).
    static let caFile = ProviderFixtures.root.appendingPathComponent("tls/ca.pem").path

    /// Why `url` is refused (parsing only), or "accepted".
    static func refusal(_ url: String) -> String {
        do {
            _ = try PostgresURL(url)
            return "accepted"
        } catch {
            return "\(error)"
        }
    }

    @Test("good URLs give their parts; bad ones are refused without the password")
    func parsing() throws {
        let url = try PostgresURL("postgres://app:s3cret@db.internal:6543/pushdispatch?sslmode=disable")
        let (configuration, _) = try url.configurations()
        #expect(configuration.host == "db.internal" && configuration.port == 6543 && configuration.username == "app")
        #expect(configuration.password == "s3cret" && configuration.database == "pushdispatch")
        #expect(url.location == "db.internal:6543/pushdispatch")
        // Printed, it shows where, not the password.
        #expect("\(url)" == "db.internal:6543/pushdispatch" && !String(reflecting: url).contains("s3cret"))
        #expect(try PostgresURL("postgresql://app@db").location == "db:5432/")
        for bad in ["mysql://a@b/c", "postgres://", "postgres://host/db", "postgres://u:pw-secret@/db", "postgres://u:pw-secret@h:70000/db", "", "::"] {
            #expect(throws: StoreError.self) { try PostgresURL(bad) }
            #expect(!Self.refusal(bad).contains("pw-secret"), "\(bad)")
        }
    }

    struct Accepted: Sendable, CustomTestStringConvertible {
        let query: String
        let mode: PostgresTLS.Mode
        let use: PostgresTLS.Use
        let verification: PostgresTLS.Verification
        let roots: PostgresTLS.Roots
        var testDescription: String { query.isEmpty ? "(no parameter)" : query }
    }

    static let ca = "/etc/db/ca%20file.pem"
    static let accepted: [Accepted] = [
        // libpq's default is prefer: TLS when the server offers it.
        .init(query: "", mode: .prefer, use: .prefer, verification: .none, roots: .system),
        .init(query: "sslmode=disable", mode: .disable, use: .disable, verification: .none, roots: .system),
        // allow behaves as prefer.
        .init(query: "sslmode=allow", mode: .allow, use: .prefer, verification: .none, roots: .system),
        .init(query: "sslmode=prefer", mode: .prefer, use: .prefer, verification: .none, roots: .system),
        .init(query: "sslmode=require", mode: .require, use: .require, verification: .none, roots: .system),
        .init(query: "sslmode=verify-ca", mode: .verifyCA, use: .require, verification: .chain, roots: .system),
        .init(query: "sslmode=verify-full", mode: .verifyFull, use: .require, verification: .chainAndHost, roots: .system),
        // A root certificate: the weaker modes that use TLS verify the chain (libpq's require does).
        .init(query: "sslrootcert=\(ca)", mode: .prefer, use: .prefer, verification: .chain, roots: .file("/etc/db/ca file.pem")),
        .init(query: "sslmode=disable&sslrootcert=\(ca)", mode: .disable, use: .disable, verification: .none, roots: .file("/etc/db/ca file.pem")),
        .init(query: "sslmode=allow&sslrootcert=\(ca)", mode: .allow, use: .prefer, verification: .chain, roots: .file("/etc/db/ca file.pem")),
        .init(query: "sslmode=prefer&sslrootcert=\(ca)", mode: .prefer, use: .prefer, verification: .chain, roots: .file("/etc/db/ca file.pem")),
        .init(query: "sslmode=require&sslrootcert=\(ca)", mode: .require, use: .require, verification: .chain, roots: .file("/etc/db/ca file.pem")),
        .init(query: "sslrootcert=\(ca)&sslmode=verify-ca", mode: .verifyCA, use: .require, verification: .chain, roots: .file("/etc/db/ca file.pem")),
        .init(
            query: "sslmode=verify-full&sslrootcert=\(ca)", mode: .verifyFull, use: .require, verification: .chainAndHost,
            roots: .file("/etc/db/ca file.pem")),
        // The system's roots, named: verify-full by default, as in libpq.
        .init(query: "sslrootcert=system", mode: .verifyFull, use: .require, verification: .chainAndHost, roots: .system),
        .init(query: "sslmode=verify-full&sslrootcert=system", mode: .verifyFull, use: .require, verification: .chainAndHost, roots: .system),
    ]

    @Test("every sslmode, with and without sslrootcert, as libpq means it", arguments: accepted)
    func sslmodes(_ expected: Accepted) throws {
        let url = try PostgresURL("postgres://app:pw-secret@db.internal/pushdispatch" + (expected.query.isEmpty ? "" : "?" + expected.query))
        #expect(url.tls.mode == expected.mode)
        #expect(url.tls.use == expected.use)
        #expect(url.tls.verification == expected.verification)
        #expect(url.tls.roots == expected.roots)
    }

    @Test(
        "unknown or contradictory TLS parameters are refused, saying what is expected",
        arguments: [
            ("sslmode=required", "sslmode=required is not known; expected disable, allow, prefer, require, verify-ca or verify-full"),
            ("sslmode=VERIFY-FULL", "sslmode=VERIFY-FULL is not known; expected disable,"),
            ("sslmode=", "sslmode= is not known; expected disable,"),
            ("sslmode", "sslmode= is not known; expected disable,"),
            ("sslmode=disable&sslmode=require", "the parameter sslmode is given twice"),
            ("sslrootcert=", "sslrootcert is empty; expected the path of a PEM file of CA certificates, or system"),
            ("sslrootcert=/a.pem&sslrootcert=/b.pem", "the parameter sslrootcert is given twice"),
            ("sslrootcert=system&sslmode=require", "sslrootcert=system needs sslmode=verify-full (or no sslmode), not sslmode=require"),
            ("sslrootcert=system&sslmode=verify-ca", "sslrootcert=system needs sslmode=verify-full (or no sslmode), not sslmode=verify-ca"),
            ("sslmode=prefer&sslrootcert=system", "sslrootcert=system needs sslmode=verify-full (or no sslmode), not sslmode=prefer"),
            ("sslmode=disable&sslrootcert=system", "sslrootcert=system needs sslmode=verify-full (or no sslmode), not sslmode=disable"),
            ("connect_timeout=10", "unknown parameter connect_timeout; accepted: sslmode, sslrootcert"),
            ("sslmode=require&sslcert=/c.pem", "unknown parameter sslcert; accepted: sslmode, sslrootcert"),
            ("password=pw", "unknown parameter password; accepted: sslmode, sslrootcert"),
            ("=x", "unknown parameter (empty); accepted: sslmode, sslrootcert"),
        ])
    func refused(query: String, message: String) {
        let refusal = Self.refusal("postgres://app:pw-secret@db.internal/pushdispatch?" + query)
        #expect(refusal.contains("store.postgres: " + message), "\(refusal)")
        #expect(!refusal.contains("pw-secret"))
    }

    @Test("sslrootcert is read when the configuration is made: a missing or empty file is refused; disable reads nothing")
    func rootCertificateFile() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-sslrootcert-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let notPEM = folder.appendingPathComponent("not-pem.txt").path
        try "not a certificate\n".write(toFile: notPEM, atomically: true, encoding: .utf8)
        let missing = folder.appendingPathComponent("missing.pem").path
        let base = "postgres://app:pw-secret@db.internal/pushdispatch?sslmode="

        for mode in ["prefer", "require", "verify-ca", "verify-full"] {
            _ = try PostgresURL(base + mode + "&sslrootcert=" + Self.caFile).configurations()
        }
        for mode in ["disable", "prefer", "require", "verify-ca", "verify-full"] {
            _ = try PostgresURL(base + mode).configurations()
        }
        // Not read with disable (as in libpq, it is ignored there).
        _ = try PostgresURL(base + "disable&sslrootcert=" + missing).configurations()

        for (path, message) in [
            (missing, "store.postgres: sslrootcert=\(missing): cannot read it (or it is over 1 MiB); expected a PEM file of CA certificates"),
            (notPEM, "store.postgres: sslrootcert=\(notPEM): no certificate in it; expected a PEM file of CA certificates"),
        ] {
            let url = try PostgresURL(base + "verify-full&sslrootcert=" + path)
            do {
                _ = try url.configurations()
                Issue.record("\(path) accepted")
            } catch {
                #expect("\(error)".contains(message), "\(error)")
                #expect(!"\(error)".contains("pw-secret"))
            }
        }
    }

    @Test("seeded mutations of a valid URL: no crash, a configuration or a clear refusal")
    func mutations() {
        let valid = Array("postgres://app:pw-secret@127.0.0.1:5432/pushdispatch?sslmode=verify-full".utf8)
        for seed in UInt64(1)...500 {
            var mutator = Mutator(seed: seed)
            let text = String(decoding: mutator.mutateBytes(valid), as: UTF8.self)
            do {
                let (configuration, _) = try PostgresURL(text).configurations()
                #expect((1...65535).contains(configuration.port ?? 0), "seed \(seed)")
            } catch {
                #expect("\(error)".contains("store.postgres"), "seed \(seed): \(error)")
                #expect(!"\(error)".contains("pw-secret"), "seed \(seed)")
            }
        }
    }
}
