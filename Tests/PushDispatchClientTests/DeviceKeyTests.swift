import Foundation
import PushCore
import PushJOSE
import Testing

@testable import PushDispatchClient

/// The device key: made once, kept in its store (a private file), read back, refused when
/// damaged.
@Suite("The device key and its stores")
struct DeviceKeyTests {
    static func folder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-client-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    @Test("the file store writes mode 0600 in a folder of mode 0700, replaces atomically, and reads back")
    func fileStore() async throws {
        let file = try Self.folder().appendingPathComponent("keys/device-key.json")
        let store = FileDeviceKeyStore(fileURL: file)
        #expect(try await store.loadKey() == nil)
        try await store.saveKey(Data("first".utf8))
        try await store.saveKey(Data("second".utf8))
        #expect(try await store.loadKey() == Data("second".utf8))
        #expect(try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int == 0o600)
        #expect(try FileManager.default.attributesOfItem(atPath: file.deletingLastPathComponent().path)[.posixPermissions] as? Int == 0o700)
        #expect(try FileManager.default.contentsOfDirectory(atPath: file.deletingLastPathComponent().path) == ["device-key.json"])
        try await store.deleteKey()
        try await store.deleteKey()
        #expect(try await store.loadKey() == nil)
    }

    @Test("standard file names: a simple application id as is, any other hashed", arguments: [
        ("toto", "toto"), ("com.example-app_1", "com.example-app_1"), ("..", nil), ("a/b", nil), ("日本", nil), (String(repeating: "a", count: 65), nil),
    ] as [(String, String?)])
    func fileNames(app: String, expected: String?) {
        let name = FileDeviceKeyStore.fileName(app)
        if let expected {
            #expect(name == expected)
        } else {
            #expect(name.count == 32 && name.allSatisfy(\.isHexDigit))
        }
        #expect(FileDeviceKeyStore.standard(app: app).fileURL.lastPathComponent == "device-key-\(name).json")
    }

    @Test("concurrent first uses make one key, stored once; a new service object reads the same key")
    func oneKey() async throws {
        let store = FileDeviceKeyStore(fileURL: try Self.folder().appendingPathComponent("k.json"))
        let keys = DeviceKeys(store: store)
        #expect(try await keys.key(create: false) == nil)
        let kids = try await withThrowingTaskGroup(of: String?.self) { group in
            for _ in 0..<16 { group.addTask { try await keys.key(create: true)?.kid } }
            return try await group.reduce(into: Set<String?>()) { $0.insert($1) }
        }
        #expect(kids.count == 1)
        let reloaded = try #require(try await DeviceKeys(store: store).key(create: false))
        #expect(Set([reloaded.kid]) == kids && reloaded.kid == reloaded.thumbprint && reloaded.use == "enc" && reloaded.isPrivate)
    }

    @Test("a damaged stored key is refused with what to do, without echoing it", arguments: [
        "not json", #"{"kty":"oct","k":"c2VjcmV0LXZhbHVl"}"#, #"{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}"#,
    ])
    func damaged(content: String) async throws {
        let store = InMemoryDeviceKeyStore()
        await store.saveKey(Data(content.utf8))
        await #expect {
            _ = try await DeviceKeys(store: store).key(create: true)
        } throws: { error in
            guard let error = error as? PushClientError else { return false }
            return error.code == .keyStore && error.message.contains("resetDeviceKey") && !error.message.contains("c2VjcmV0")
        }
    }
}
