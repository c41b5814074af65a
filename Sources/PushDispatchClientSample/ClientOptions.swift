import ArgumentParser
import Foundation
import PushDispatchClient
import PushJSON

/// What every command needs to reach the service as one user of one application, on one
/// device.
struct ClientOptions: ParsableArguments {
    @Option(help: "The service's base URL (https://, or http:// on a loopback host).")
    var url: String

    @Option(help: "The application id.")
    var app: String

    @Option(help: "The user id (the token's subject).")
    var uid: String?

    @Option(help: "The environment variable holding the user's bearer token (a token never goes on a command line).")
    var tokenEnv = "PUSHDISPATCH_TOKEN"

    @Option(help: "This device's push token: fcm:TOKEN, hms:TOKEN, apns:HEX or webpush:JSON.")
    var device: String?

    @Option(help: "The file that keeps the device's private key (default: the library's standard place).")
    var keyFile: String?

    @Option(help: "A JWK Set file of keys the application shares with its devices (HS256, dir, A128KW, A256KW).")
    var sharedKeys: String?

    @Option(help: "The file that keeps the offline queue across runs (enables persistence; --offline commands queue into it).")
    var queueFile: String?

    @Option(help: "Most operations the offline queue holds.")
    var queueLimit = 256

    /// The service object these options describe.
    func service() throws -> PushDispatch {
        guard let baseURL = URL(string: url) else { throw ValidationError("--url: not a URL") }
        let environment = ProcessInfo.processInfo.environment
        let uid = self.uid
        let tokenEnv = self.tokenEnv
        let token = environment[tokenEnv]
        var shared: [JWK] = []
        if let sharedKeys {
            shared = try JWK.keys(inJWKSet: try Data(contentsOf: URL(fileURLWithPath: sharedKeys)))
        }
        return try PushDispatch(
            .init(
                baseURL: baseURL, app: app,
                credentials: { _ in
                    guard let uid, let token else {
                        throw ValidationError("this command needs --uid and the token in $\(tokenEnv)")
                    }
                    return Credentials(uid: uid, token: token)
                },
                deviceToken: try device.map(Self.deviceToken),
                keyStore: keyFile.map { FileDeviceKeyStore(fileURL: URL(fileURLWithPath: $0)) }, sharedKeys: shared,
                offlineQueue: OfflineQueueConfiguration(
                    limit: queueLimit, store: queueFile.map { FileOperationQueueStore(fileURL: URL(fileURLWithPath: $0)) })))
    }

    /// `fcm:…`, `hms:…`, `harmonyos:…`, `apns:…` or `webpush:…`.
    static func deviceToken(_ text: String) throws -> DeviceToken {
        guard let colon = text.firstIndex(of: ":") else {
            throw ValidationError("--device: expected fcm:TOKEN, hms:TOKEN, harmonyos:TOKEN, apns:HEX or webpush:JSON")
        }
        let value = String(text[text.index(after: colon)...])
        switch text[..<colon] {
        case "fcm": return try .fcm(value)
        case "hms": return try .hms(value)
        case "harmonyos": return try .harmonyOS(value)
        case "apns": return try .apns(hex: value)
        case "webpush": return try .webPush(subscriptionJSON: value)
        default: throw ValidationError("--device: expected fcm:, hms:, harmonyos:, apns: or webpush: before the token")
        }
    }
}
