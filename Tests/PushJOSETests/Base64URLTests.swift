import Testing
@testable import PushJOSE

@Suite("Base64url")
struct Base64URLTests {
    @Test("RFC 4648 vectors, URL-safe and unpadded", arguments: [
        ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"), ("foobar", "Zm9vYmFy"),
    ])
    func vectors(plain: String, encoded: String) {
        #expect(Base64URL.encodeToString(Array(plain.utf8)) == encoded)
        #expect(Base64URL.decode(encoded) == Array(plain.utf8))
    }

    @Test("the URL-safe alphabet replaces + and /")
    func alphabet() {
        #expect(Base64URL.encodeToString([0xFB, 0xFF, 0xBF]) == "-_-_")
        #expect(Base64URL.decode("-_-_") == [0xFB, 0xFF, 0xBF])
    }

    /// Padding, the standard alphabet, white space, impossible lengths and non-zero unused
    /// bits ("Zh", "Zm9" and "Zm9vYh" spell "f", "fo", "foob" non-canonically).
    @Test("decoding is strict", arguments: ["Zg==", "Zm9v+", "Zm9v/", "Z", "Zm 9v", "Zh", "Zm9", "Zm9vYh"])
    func strict(text: String) {
        #expect(Base64URL.decode(text) == nil)
    }

    @Test("every length round-trips")
    func roundTrip() {
        for length in 0..<70 {
            let data = (0..<length).map { UInt8(($0 * 37 + 11) & 0xFF) }
            let encoded = Base64URL.encode(data)
            #expect(encoded.count == Base64URL.encodedLength(length))
            #expect(Base64URL.decode(encoded) == data)
        }
    }
}
