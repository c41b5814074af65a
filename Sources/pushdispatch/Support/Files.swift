import ArgumentParser
import Foundation
import PushCore
import PushJSON
import PushJOSE
import PushService

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

/// Runs a line filter on standard input (``runLineFilter(_:)``); exits with status 1, after
/// saying how many lines failed, if any did.
func filterLines(command: String, unit: String, _ process: (UnsafeBufferPointer<UInt8>, inout JSONWriter) -> Bool) throws {
    let failures = try runLineFilter(process)
    if failures > 0 {
        printError("pushdispatch \(command): \(failures) \(unit)\(failures == 1 ? "" : "s") failed")
        throw ExitCode(1)
    }
}
