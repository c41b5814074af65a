import Crypto
import Foundation
import PushCore
import PushJSON
import PushDispatchClient
import PushJOSE
import PushFakes
import PushTestSupport
import Synchronization

/// `pushdispatch run` with the fake providers, for the tests of the app library: two
/// applications (`toto`, signed with `sig-es` of the test key set, with read rules and a
/// subscription limit; `other`, signed with the service's own key), a webhook, records
/// written to the queue file.
final class ClientLibraryHarness: Sendable {
    static let secret = "client-library-secret-of-32-bytes-at-least"
    static let otherSecret = "another-application-secret-of-32-bytes!!"
    static let webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    static let keyset = ProviderFixtures.root.appendingPathComponent("jose/test-keyset.json")

    let fakes: FakeProviders
    let folder: URL
    let port: Int
    let service: Mutex<RunningService?>
    private let seq = Mutex(0)

    private init(fakes: FakeProviders, folder: URL, port: Int, service: RunningService) {
        self.fakes = fakes
        self.folder = folder
        self.port = port
        self.service = Mutex(service)
    }

    /// Starts the fakes and the service (on `port`, or a free one), and waits until it is ready.
    static func start(signingKey: String = "sig-es", port fixedPort: Int? = nil) async throws -> ClientLibraryHarness {
        let fakes = try await FakeProviders.start(tls: true, webhooks: ["orders": webhookSecret])
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-client-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(fakes.serviceAccountJSON).write(to: folder.appendingPathComponent("service-account.json"))
        // APNs with the fake team's key; Web Push with a key made for the run.
        let vapid = P256.Signing.PrivateKey()
        try Data(fakes.apnsPrivateKeyPEM.utf8).write(to: folder.appendingPathComponent("AuthKey.p8"))
        try Data(vapid.pemRepresentation.utf8).write(to: folder.appendingPathComponent("vapid.pem"))
        fakes.setWebPushVAPIDKey(Base64URL.encodeToString(vapid.publicKey.x963Representation))
        FileManager.default.createFile(atPath: folder.appendingPathComponent("changes.ndjson").path, contents: nil)
        try writeConfiguration(folder: folder, fakes: fakes, signingKey: signingKey, port: fixedPort ?? 0)
        let service = try RunningService(config: folder.appendingPathComponent("pushdispatch.yaml").path)
        let port = try await service.port()
        let harness = ClientLibraryHarness(fakes: fakes, folder: folder, port: port, service: service)
        try await harness.waitUntilReady()
        return harness
    }

    static func writeConfiguration(folder: URL, fakes: FakeProviders, signingKey: String, port: Int) throws {
        try Data(
            """
            store: {sqlite: ./store.db}
            ingest: {queueFile: ./changes.ndjson, deadLetter: ./dead.ndjson}
            http: {port: \(port)}
            delivery: {caFile: "\(ProviderFixtures.root.appendingPathComponent("tls/ca.pem").path)", timeout: 60s}
            apps:
              toto:
                auth: {hs256Secret: "\(secret)"}
                fcm: {serviceAccountFile: ./service-account.json, endpoint: "\(fakes.fcmEndpoint)"}
                hms: {clientId: "\(fakes.hmsClientID)", clientSecret: "\(fakes.hmsClientSecret)", endpoint: "\(fakes.hmsEndpoint)", tokenEndpoint: "\(fakes.hmsTokenEndpoint)"}
                webhooks: {orders: {url: "\(fakes.webhookURL("orders"))", secret: "\(webhookSecret)"}}
                apns: {teamId: \(FakeProviders.apnsTeamID), keyId: \(FakeProviders.apnsKeyID), privateKey: file:./AuthKey.p8, topic: \(FakeProviders.apnsTopic), endpoint: "\(fakes.apnsEndpoint)"}
                webpush: {vapidPrivateKey: file:./vapid.pem, subject: "mailto:push-admin@example.com", allowPrivateAddresses: true}
                keys: "\(keyset.path)"
                signingKey: \(signingKey)
                subscriptions: {maxPerUser: 12}
                rules: {rules: {"$top": {".read": "$top != 'private'"}}}
              other:
                auth: {hs256Secret: "\(otherSecret)"}
                fcm: {serviceAccountFile: ./service-account.json, endpoint: "\(fakes.fcmEndpoint)"}
            """.utf8
        ).write(to: folder.appendingPathComponent("pushdispatch.yaml"))
    }

    func waitUntilReady() async throws {
        try await ServiceEndToEndTests.eventually("ready") { try RunCommandTests.curl(["http://127.0.0.1:\(port)/readyz"]).status == 200 }
    }

    /// Stops the service, rewrites the configuration with another signing key, starts it
    /// again on the same port.
    func restart(signingKey: String) async throws {
        let stopped = service.withLock { $0 }.map { $0.stop() }
        precondition(stopped == 0, "the service did not stop cleanly")
        try Self.writeConfiguration(folder: folder, fakes: fakes, signingKey: signingKey, port: port)
        let restarted = try RunningService(config: folder.appendingPathComponent("pushdispatch.yaml").path)
        service.withLock { $0 = restarted }
        guard try await restarted.port() == port else { throw RunningService.ServiceError(message: "the service moved to another port") }
        try await waitUntilReady()
    }

    /// Stops the service (the fakes stay): its port then refuses connections.
    func stopService() {
        let stopped = service.withLock { running -> Int32? in
            defer { running = nil }
            return running?.stop()
        }
        precondition(stopped == nil || stopped == 0, "the service did not stop cleanly")
    }

    /// Starts the service again on its port, and waits until it is ready.
    func startService() async throws {
        let restarted = try RunningService(config: folder.appendingPathComponent("pushdispatch.yaml").path)
        service.withLock { $0 = restarted }
        guard try await restarted.port() == port else { throw RunningService.ServiceError(message: "the service moved to another port") }
        try await waitUntilReady()
    }

    func stop() async {
        _ = service.withLock { $0 }?.stop()
        await fakes.stop()
    }

    /// An HS256 bearer token of `app` for `uid`.
    static func token(_ uid: String, app: String = "toto", expiresIn: Int64 = 600) throws -> String {
        let secret = app == "toto" ? secret : otherSecret
        let key = try JWK(json: ["kty": "oct", "k": .string(Base64URL.encodeToString(Array(secret.utf8)))])
        let claims: JSON = ["sub": .string(uid), "exp": .int(Int64(Date().timeIntervalSince1970) + expiresIn)]
        return String(decoding: try JWSSigner(key: key, algorithm: .hs256).sign(Array(claims.description.utf8)), as: UTF8.self)
    }

    /// The library's service object for `uid` on this device, against this service.
    func client(
        app: String = "toto", uid: String = "alice", device: DeviceToken?, keyStore: any DeviceKeyStore = InMemoryDeviceKeyStore(),
        sharedKeys: [JWK] = [], refetchInterval: Duration = .seconds(60), credentials: CredentialsProvider? = nil,
        port: Int? = nil, offlineQueue: OfflineQueueConfiguration = OfflineQueueConfiguration()
    ) throws -> PushDispatch {
        let token = try Self.token(uid, app: app)
        return try PushDispatch(
            .init(
                baseURL: URL(string: "http://127.0.0.1:\(port ?? self.port)")!, app: app,
                credentials: credentials ?? { _ in Credentials(uid: uid, token: token) }, deviceToken: device, keyStore: keyStore,
                sharedKeys: sharedKeys, keysRefetchInterval: refetchInterval, offlineQueue: offlineQueue))
    }

    /// Appends change records to the queue file, numbering them.
    func write(_ records: [(app: String, op: String, path: String, data: String)]) throws {
        let lines = seq.withLock { seq -> [String] in
            records.map { record in
                seq += 1
                return #"{"seq":\#(seq),"app":"\#(record.app)","op":"\#(record.op)","path":"\#(record.path)","data":\#(record.data)}"#
            }
        }
        try CrashTests.append(lines[...], to: folder)
    }

    /// A revoke record.
    func revoke(app: String = "toto", path: String, reason: String) throws {
        let line = seq.withLock { seq -> String in
            seq += 1
            return #"{"seq":\#(seq),"app":"\#(app)","op":"revoke","path":"\#(path)","reason":"\#(reason)"}"#
        }
        try CrashTests.append([line][...], to: folder)
    }

    /// The data maps the fake FCM accepted for `token`, once there are at least `count`.
    func fcmData(_ token: String, count: Int) async throws -> [[String: String]] {
        try await ServiceEndToEndTests.eventually("\(count) FCM messages for \(token)") {
            fakes.received(provider: "fcm").filter { $0.target == token && $0.status == 200 }.count >= count
        }
        return try fakes.received(provider: "fcm").filter { $0.target == token && $0.status == 200 }.map { received in
            guard case .object(let object) = try JSONParser.parse(received.data) else { throw RunningService.ServiceError(message: "not a map") }
            var data: [String: String] = [:]
            for (key, value) in object { data[key.string] = value.stringValue }
            return data
        }
    }

    /// How many messages the fake FCM received for `token`, whatever it answered.
    func fcmMessages(_ token: String) -> Int {
        fakes.received(provider: "fcm").filter { $0.target == token }.count
    }
}
