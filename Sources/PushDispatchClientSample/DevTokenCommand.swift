import ArgumentParser
import Foundation
import PushCore
import PushJSON
import PushJOSE

/// `dev-token`: prints an HS256 bearer token for a user, signed with the application's
/// `auth.hs256Secret` — for trying the library against a local service only; an app gets its
/// tokens from its back end.
struct DevTokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev-token", abstract: "Print an HS256 token for --uid, signed with the secret in $--secret-env (local services only).")

    @Option(help: "The user id (the token's subject).")
    var uid: String

    @Option(help: "The environment variable holding the application's auth.hs256Secret.")
    var secretEnv: String

    @Option(help: "The token's lifetime in seconds.")
    var lifetime = 3600

    func run() async throws {
        guard let secret = ProcessInfo.processInfo.environment[secretEnv], secret.utf8.count >= 32 else {
            throw ValidationError("$\(secretEnv) must hold the application's hs256Secret (at least 32 bytes)")
        }
        guard (1...86_400).contains(lifetime) else { throw ValidationError("--lifetime: 1 to 86400 seconds") }
        let key = try JWK(json: ["kty": "oct", "k": .string(Base64URL.encodeToString(Array(secret.utf8)))])
        let now = Int64(Date().timeIntervalSince1970)
        let claims: JSON = ["sub": .string(uid), "iat": .int(now), "exp": .int(now + Int64(lifetime))]
        print(String(decoding: try JWSSigner(key: key, algorithm: .hs256).sign(Array(claims.description.utf8)), as: UTF8.self))
    }
}
