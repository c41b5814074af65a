import ArgumentParser
import PushCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a file descriptor line by line (`\n`-terminated; a last line without one counts).
struct LineReader {
    let descriptor: Int32
    private var pending: [UInt8] = []
    private var chunk = [UInt8](repeating: 0, count: 1 << 16)

    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Calls `onLine` for each line (without its newline) and `onChunkEnd` after each read, so
    /// output can be flushed while input trickles in.
    mutating func forEachLine(
        _ onLine: (UnsafeBufferPointer<UInt8>) -> Void, onChunkEnd: () -> Void
    ) throws(IOError) {
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw IOError("reading standard input failed: \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            pending.append(contentsOf: chunk[0..<count])
            var lineStart = 0
            pending.withUnsafeBufferPointer { buffer in
                var i = 0
                while i < buffer.count {
                    if buffer[i] == UInt8(ascii: "\n") {
                        onLine(UnsafeBufferPointer(rebasing: buffer[lineStart..<i]))
                        lineStart = i + 1
                    }
                    i += 1
                }
            }
            pending.removeSubrange(0..<lineStart)
            onChunkEnd()
        }
        if !pending.isEmpty {
            pending.withUnsafeBufferPointer { onLine($0) }
            onChunkEnd()
        }
    }
}

/// Buffered writes to a file descriptor.
struct OutputBuffer {
    let descriptor: Int32
    var bytes: [UInt8] = []

    init(descriptor: Int32) {
        self.descriptor = descriptor
        bytes.reserveCapacity(1 << 16)
    }

    mutating func flush() throws(IOError) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                throw IOError("writing output failed: \(String(cString: strerror(errno)))")
            }
            offset += written
        }
        bytes.removeAll(keepingCapacity: true)
    }
}

struct IOError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Writes a line to standard error.
func printError(_ message: String) {
    var line = Array(message.utf8)
    line.append(UInt8(ascii: "\n"))
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

/// Runs a line filter on standard input: `process` turns each line into one output line
/// (without its newline) and returns `false` when the line failed. Output is flushed as input
/// arrives. Exits with status 1, after saying how many lines failed, if any did.
func runLineFilter(command: String, unit: String, _ process: (UnsafeBufferPointer<UInt8>, inout JSONWriter) -> Bool) throws {
    var output = OutputBuffer(descriptor: 1)
    var reader = LineReader(descriptor: 0)
    var writer = JSONWriter(capacity: 8192)
    var failures = 0
    var ioError: IOError?
    try reader.forEachLine({ line in
        writer.removeAll()
        if !process(line, &writer) { failures += 1 }
        writer.raw(UInt8(ascii: "\n"))
        writer.withUnsafeBytes { output.bytes.append(contentsOf: $0) }
    }, onChunkEnd: {
        do throws(IOError) { try output.flush() } catch { ioError = error }
    })
    try output.flush()
    if let ioError { throw ioError }
    if failures > 0 {
        printError("pushdispatch \(command): \(failures) \(unit)\(failures == 1 ? "" : "s") failed")
        throw ExitCode(1)
    }
}
