import Foundation
import PushCore
import PushJSON
@testable import PushJOSE

/// Files under the repository's `fixtures/`.
enum Fixtures {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("fixtures")

    static func json(_ name: String) throws -> JSON {
        let data = try Data(contentsOf: root.appendingPathComponent("jose").appendingPathComponent(name))
        return try JSONParser.parse([UInt8](data))
    }

    /// The test key set: application keys (sig-es, sig-hs, sig-ed, enc-dir, enc-dir128,
    /// enc-kw, enc-kw128) and device private keys (dev-ec, dev-rsa).
    static func keyRing() throws -> KeyRing {
        try KeyRing(jwkSet: json("test-keyset.json"))
    }

    static func key(_ kid: String) throws -> JWK {
        try keyRing().key(kid: kid)!
    }
}

extension JSON {
    func string(_ name: String) -> String { self[name]!.stringValue! }
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

func hex(_ text: String) -> [UInt8] {
    var out: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        out.append(UInt8(text[index..<next], radix: 16)!)
        index = next
    }
    return out
}
