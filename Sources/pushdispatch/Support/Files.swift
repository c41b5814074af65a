import ArgumentParser
import Foundation
import PushJOSE

/// The contents of a file, or a validation error naming it.
func readFile(_ path: String, what: String) throws -> [UInt8] {
    guard let data = FileManager.default.contents(atPath: path) else {
        throw ValidationError("cannot read \(what) \(path): no such file or not readable")
    }
    return [UInt8](data)
}

/// A JWK Set from a file.
func loadKeyRing(_ path: String) throws -> KeyRing {
    do {
        return try KeyRing(jwkSetText: try readFile(path, what: "the JWK Set"))
    } catch let error as JOSEError {
        throw ValidationError("\(path): \(error)")
    }
}
