import Foundation
import Logging
import NIOSSL
import PostgresNIO
import PushCore
import PushContracts

/// A `store.postgres` URL, `postgres://user:password@host:port/database?sslmode=…&sslrootcert=…`,
/// parsed: where the database is, who connects, and how TLS is used (``PostgresTLS``). It holds
/// the password, so it describes itself by its ``location`` only, and no error made from it
/// repeats the password.
struct PostgresURL: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    let host: String
    let port: Int
    let user: String
    let password: String?
    let database: String?
    let tls: PostgresTLS

    /// Parses `url` (nothing is read or connected yet). Throws ``StoreError/Kind/unavailable``
    /// with a message that names `store.postgres`, what is wrong and what was expected.
    init(_ url: String) throws {
        guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme ?? ""),
            let host = components.host, !host.isEmpty, let user = components.user, !user.isEmpty
        else {
            throw StoreError.unavailable("store.postgres: expected postgres://user:password@host:port/database")
        }
        if let port = components.port, !(1...65535).contains(port) {
            throw StoreError.unavailable("store.postgres: the port \(port) is not 1 to 65535")
        }
        let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : ""
        self.host = host
        self.port = components.port ?? 5432
        self.user = user
        self.password = components.password
        self.database = database.isEmpty ? nil : database
        self.tls = try PostgresTLS(query: components.queryItems ?? [])
    }

    /// Where it is, without the password (messages).
    var location: String { "\(host):\(port)/\(database ?? "")" }

    var description: String { location }
    var debugDescription: String { location }

    /// The configuration of the store's client, and that of the one connection ``check(logger:)``
    /// makes, with the same TLS. Reads the `sslrootcert` file.
    func configurations() throws -> (client: PostgresClient.Configuration, connection: PostgresConnection.Configuration) {
        let context = try tls.configuration()
        var client = PostgresClient.Configuration(
            host: host, port: port, username: user, password: password, database: database, tls: context.map(\.client) ?? .disable)
        client.options.maximumConnections = 16
        // A transaction whose client went silent (its link cut between two statements) is ended
        // by the server, with its locks: a fenced commit holds its application's lease row, and
        // while it did every other instance's takeover waited (docs/decisions.md, "A broken
        // network"). No statement of ours leaves its session idle that long in a transaction.
        client.options.additionalStartupParameters = [("idle_in_transaction_session_timeout", "\(Self.idleInTransactionTimeout)")]
        let connection = PostgresConnection.Configuration(
            host: host, port: port, username: user, password: password, database: database, tls: context.map(\.connection) ?? .disable)
        return (client, connection)
    }

    /// Milliseconds a session may stay idle inside a transaction before the server ends it
    /// (the lease time: a cut instance's applications are taken over about one lease later).
    static let idleInTransactionTimeout = 5_000

    /// Opens one connection and closes it. The client's pool retries a connection that fails
    /// and reports, a minute later, only that it gave up; this check fails at once with the
    /// reason: a refusal by the server (`pg_hba.conf`, the password), a server without TLS
    /// when the `sslmode` requires it, a certificate that fails verification.
    ///
    /// A connect that times out (a loaded machine, a server still starting) is tried again for
    /// up to a minute, as the pool would; every other failure is reported at once.
    func check(_ configuration: PostgresConnection.Configuration, logger: Logger) async throws {
        var configuration = configuration
        configuration.options.connectTimeout = .seconds(20)
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            do {
                let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
                try? await connection.close()
                return
            } catch {
                let timedOut = (error as? PSQLError)?.code == .connectionError && "\(error)".lowercased().contains("timeout")
                guard timedOut, ContinuousClock.now < deadline else { throw connectionFailure(error) }
                logger.warning("PostgreSQL did not answer in time; trying again", metadata: ["database": "\(location)"])
                try await Task.sleep(for: .milliseconds(500))
            }
        }
    }

    /// Why a connection could not be made, for the operator: what the server or the TLS
    /// handshake said, and what the `sslmode` expected.
    func connectionFailure(_ error: any Error) -> StoreError {
        let mode = "sslmode=\(tls.mode.rawValue)"
        if let error = error as? PSQLError {
            if error.code == .sslUnsupported {
                return .unavailable(
                    "store.postgres: PostgreSQL at \(location) does not offer TLS, and \(mode) requires it; expected a server with ssl = on")
            }
            if let underlying = error.underlying as? NIOSSLExtraError, underlying == .failedToValidateHostname {
                return .unavailable(
                    "store.postgres: the certificate of PostgreSQL at \(location) is not valid for \(host) (\(mode) checks the host name); "
                        + "expected a host name or address the certificate names")
            }
            if let underlying = error.underlying as? NIOSSLError {
                if "\(underlying)".contains("CERTIFICATE_VERIFY_FAILED") {
                    return .unavailable(
                        "store.postgres: the certificate of PostgreSQL at \(location) is not signed by a CA of \(tls.roots) (\(mode) verifies it); "
                            + "expected the CA that signed it in sslrootcert=PATH")
                }
                return .unavailable("store.postgres: TLS with PostgreSQL at \(location) failed (\(mode)): \(String(describing: underlying).prefix(300))")
            }
        }
        let cause = PostgresStore.storeError(error, subscriptionID: nil, location: location)
        var message = "store.postgres: cannot connect: \(cause.detail ?? "\(cause)")"
        if tls.mode == .disable, message.contains("no encryption") {
            message += "; the server accepts only TLS, which sslmode=disable never uses"
        }
        return .unavailable(message)
    }
}

/// How the connection to PostgreSQL uses TLS: the URL's `sslmode` and `sslrootcert`, with
/// libpq's meanings (docs/decisions.md, "PostgreSQL TLS (issue 22)").
///
/// | `sslmode` | TLS | certificate |
/// |---|---|---|
/// | `disable` | never | — |
/// | `allow`, `prefer` (the default) | when the server offers it, else in clear | not verified; its chain when `sslrootcert` is a file |
/// | `require` | required | not verified; its chain when `sslrootcert` is a file |
/// | `verify-ca` | required | its chain, against `sslrootcert` or the system's roots |
/// | `verify-full` | required | its chain, and the host name |
///
/// `allow` behaves as `prefer` (libpq tries in clear first; the client here tries TLS first).
/// `sslrootcert=system` names the system's trust roots and, as in libpq, makes `verify-full`
/// the default and refuses weaker modes: any certificate of a public CA would pass them.
struct PostgresTLS: Equatable, Sendable {
    /// The `sslmode` values.
    enum Mode: String, CaseIterable, Sendable {
        case disable, allow, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"
    }

    /// Whose CA certificates a verified chain must lead to.
    enum Roots: Equatable, Sendable, CustomStringConvertible {
        /// The system's trust store (no `sslrootcert`, or `sslrootcert=system`).
        case system
        /// The PEM file of `sslrootcert=PATH`.
        case file(String)

        var description: String {
            switch self {
            case .system: "the system's trust roots"
            case .file(let path): "sslrootcert=\(path)"
            }
        }
    }

    /// Whether the connection uses TLS.
    enum Use: Equatable, Sendable {
        /// Never (in clear).
        case disable
        /// When the server offers it; in clear otherwise.
        case prefer
        /// Always: a server without TLS is refused.
        case require
    }

    /// What of the server's certificate is checked.
    enum Verification: Equatable, Sendable {
        /// Nothing (the connection is encrypted, the server not authenticated).
        case none
        /// Its chain leads to a trusted root.
        case chain
        /// Its chain, and that it names the host connected to.
        case chainAndHost
    }

    let mode: Mode
    let roots: Roots
    /// Whether `sslrootcert=system` was given (then only `verify-full` is accepted).
    private let explicitSystemRoots: Bool

    /// The query parameters a URL may carry (libpq's names); any other is refused.
    static let parameters = ["sslmode", "sslrootcert"]

    /// From the URL's query: `sslmode` and `sslrootcert`, each once at most, and nothing else.
    init(query: [URLQueryItem]) throws {
        var values: [String: String?] = [:]
        for item in query {
            guard Self.parameters.contains(item.name) else {
                throw StoreError.unavailable(
                    "store.postgres: unknown parameter \(item.name.isEmpty ? "(empty)" : item.name); accepted: \(Self.parameters.joined(separator: ", "))")
            }
            guard values[item.name] == nil else {
                throw StoreError.unavailable("store.postgres: the parameter \(item.name) is given twice; expected it once")
            }
            values[item.name] = .some(item.value)
        }
        try self.init(sslmode: values["sslmode"], sslrootcert: values["sslrootcert"])
    }

    /// From the URL's parameters: absent (`nil`), or given with a value or none (`.some(nil)`).
    init(sslmode: String??, sslrootcert: String??) throws {
        switch sslrootcert {
        case .none: (roots, explicitSystemRoots) = (.system, false)
        case .some("system"): (roots, explicitSystemRoots) = (.system, true)
        case .some(.some(let path)) where !path.isEmpty: (roots, explicitSystemRoots) = (.file(path), false)
        case .some:
            throw StoreError.unavailable("store.postgres: sslrootcert is empty; expected the path of a PEM file of CA certificates, or system")
        }
        switch sslmode {
        case .none:
            mode = explicitSystemRoots ? .verifyFull : .prefer
        case .some(let value):
            guard let value, let mode = Mode(rawValue: value) else {
                throw StoreError.unavailable(
                    "store.postgres: sslmode=\(sslmode.flatMap { $0 } ?? "") is not known; expected "
                        + Mode.allCases.map(\.rawValue).dropLast().joined(separator: ", ") + " or verify-full")
            }
            self.mode = mode
        }
        if explicitSystemRoots, mode != .verifyFull {
            throw StoreError.unavailable(
                "store.postgres: sslrootcert=system needs sslmode=verify-full (or no sslmode), not sslmode=\(mode.rawValue): "
                    + "any certificate of a public CA passes a weaker check")
        }
    }

    var use: Use {
        switch mode {
        case .disable: .disable
        case .allow, .prefer: .prefer
        case .require, .verifyCA, .verifyFull: .require
        }
    }

    var verification: Verification {
        switch mode {
        case .disable: .none
        // libpq: given a root certificate, require (and prefer) verify the chain as verify-ca.
        case .allow, .prefer, .require: if case .file = roots { .chain } else { .none }
        case .verifyCA: .chain
        case .verifyFull: .chainAndHost
        }
    }

    /// The TLS of the client and of a single connection; `nil` for `disable`. Reads the
    /// `sslrootcert` file (at most 1 MiB of PEM certificates).
    func configuration() throws -> (client: PostgresClient.Configuration.TLS, connection: PostgresConnection.Configuration.TLS)? {
        guard use != .disable else { return nil }
        var configuration = TLSConfiguration.makeClientConfiguration()
        switch verification {
        case .none: configuration.certificateVerification = .none
        case .chain: configuration.certificateVerification = .noHostnameVerification
        case .chainAndHost: configuration.certificateVerification = .fullVerification
        }
        if case .file(let path) = roots, verification != .none {
            configuration.trustRoots = .certificates(try Self.certificates(path))
        }
        let context: NIOSSLContext
        do {
            context = try NIOSSLContext(configuration: configuration)
        } catch {
            throw StoreError.unavailable("store.postgres: cannot set up TLS (sslmode=\(mode.rawValue), \(roots)): \(error)")
        }
        return use == .prefer ? (.prefer(configuration), .prefer(context)) : (.require(configuration), .require(context))
    }

    /// The CA certificates of a PEM file.
    static func certificates(_ path: String) throws -> [NIOSSLCertificate] {
        guard let data = FileManager.default.contents(atPath: path), data.count <= 1 << 20 else {
            throw StoreError.unavailable("store.postgres: sslrootcert=\(path): cannot read it (or it is over 1 MiB); expected a PEM file of CA certificates")
        }
        let certificates = (try? NIOSSLCertificate.fromPEMBytes([UInt8](data))) ?? []
        guard !certificates.isEmpty else {
            throw StoreError.unavailable("store.postgres: sslrootcert=\(path): no certificate in it; expected a PEM file of CA certificates")
        }
        return certificates
    }
}

extension PostgresStore {
    /// What is wrong with the TLS parameters of a `store.postgres` URL (`sslmode`,
    /// `sslrootcert` and nothing else; the `sslrootcert` file is read), found without
    /// connecting, so that `config check` refuses what ``open(url:logger:)`` would; `nil` when
    /// nothing is. The message follows the key's name and never holds the password.
    public static func tlsProblem(url: String) -> String? {
        guard let components = URLComponents(string: url) else { return nil }  // the URL's form: see open(url:logger:)
        do {
            _ = try PostgresTLS(query: components.queryItems ?? []).configuration()
            return nil
        } catch {
            let message = (error as? StoreError)?.detail ?? "\(error)"
            return message.hasPrefix("store.postgres: ") ? String(message.dropFirst("store.postgres: ".count)) : message
        }
    }
}
