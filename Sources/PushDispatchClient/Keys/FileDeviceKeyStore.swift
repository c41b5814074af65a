import Crypto
import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Keeps the device key in one file, readable and writable by its owner only (mode 0600, in a
/// folder of mode 0700 when this store creates it). Writes are atomic: a new key is written to
/// a temporary file beside it and renamed over the old one.
public struct FileDeviceKeyStore: DeviceKeyStore {
    /// The key's file.
    public let fileURL: URL

    /// A store for the key at `fileURL`.
    public init(fileURL: URL) {
        self.fileURL = fileURL
    }

    /// The default store of an application's key: `PushDispatchClient/device-key-<app>.json`
    /// in the user's application support folder (`~/.local/share` on Linux, unless
    /// `XDG_DATA_HOME` says otherwise; `Library/Application Support` in an Apple app's
    /// container).
    public static func standard(app: String) -> FileDeviceKeyStore {
        let base =
            FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
            ?? FileManager.default.temporaryDirectory
        return FileDeviceKeyStore(
            fileURL: base.appendingPathComponent("PushDispatchClient", isDirectory: true).appendingPathComponent("device-key-\(fileName(app)).json"))
    }

    /// A file-name-safe form of an application id: itself when it is 1–64 letters, digits,
    /// `.`, `_` or `-` (and not dots only), else the hexadecimal SHA-256 of it, cut to 32 digits.
    static func fileName(_ app: String) -> String {
        let bytes = Array(app.utf8)
        let simple =
            (1...64).contains(bytes.count) && !bytes.allSatisfy({ $0 == UInt8(ascii: ".") })
            && bytes.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
                    || byte == UInt8(ascii: "-")
            }
        if simple { return app }
        return SHA256.hash(data: bytes).prefix(16).map { String($0, radix: 16).leftPadded(to: 2) }.joined()
    }

    /// The file's contents; `nil` when there is no file.
    public func loadKey() async throws -> Data? {
        guard FileManager.default.fileExists(atPath: fileURL.path) else { return nil }
        return try Data(contentsOf: fileURL)
    }

    /// Writes `key` to the file (mode 0600), atomically.
    public func saveKey(_ key: Data) async throws {
        try Self.replace(fileURL, with: key)
    }

    /// Replaces the file at `url` with `data`: a temporary file beside it, created with mode
    /// 0600 from the start (never readable by others, not even for a moment), flushed to disk,
    /// renamed over the old one; then the folder (made with mode 0700 if missing) is flushed,
    /// so that the rename reaches the disk too. Readers see all of the old file or all of the
    /// new.
    static func replace(_ url: URL, with data: Data) throws {
        let folder = url.deletingLastPathComponent()
        if !FileManager.default.fileExists(atPath: folder.path) {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        let temporary = folder.appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString).tmp")
        try writeNew(temporary.path, data)
        guard rename(temporary.path, url.path) == 0 else {
            let code = errno
            unlink(temporary.path)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
        let descriptor = open(folder.path, O_RDONLY)
        if descriptor >= 0 {
            _ = fsync(descriptor)
            close(descriptor)
        }
    }

    /// Creates `path` (it must not exist) with mode 0600, writes `data` and flushes it to disk.
    static func writeNew(_ path: String, _ data: Data) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(descriptor) }
        let bytes = [UInt8](data)
        var written = 0
        while written < bytes.count {
            let result = bytes[written...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if result < 0 {
                if errno == EINTR { continue }
                let code = errno
                unlink(path)
                throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
            }
            written += result
        }
        guard fsync(descriptor) == 0 else {
            let code = errno
            unlink(path)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
    }

    /// Removes the file, if there is one.
    public func deleteKey() async throws {
        guard FileManager.default.fileExists(atPath: fileURL.path) else { return }
        try FileManager.default.removeItem(at: fileURL)
    }
}

extension String {
    func leftPadded(to length: Int) -> String {
        count >= length ? self : String(repeating: "0", count: length - count) + self
    }
}
