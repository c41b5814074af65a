import PushCore
import PushJSON

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a file descriptor line by line (`\n`-terminated; a last line without one counts).
public struct LineReader {
    let descriptor: Int32
    private var pending: [UInt8] = []
    private var chunk = [UInt8](repeating: 0, count: 1 << 16)

    public init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Calls `onLine` for each line (without its newline) and `onChunkEnd` after each read, so
    /// output can be flushed while input trickles in.
    public mutating func forEachLine(
        _ onLine: (UnsafeBufferPointer<UInt8>) -> Void, onChunkEnd: () -> Void
    ) throws(LineIOError) {
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw LineIOError("reading standard input failed: \(String(cString: strerror(errno)))")
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
public struct OutputBuffer {
    let descriptor: Int32
    public var bytes: [UInt8] = []

    public init(descriptor: Int32) {
        self.descriptor = descriptor
        bytes.reserveCapacity(1 << 16)
    }

    public mutating func flush() throws(LineIOError) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                throw LineIOError("writing output failed: \(String(cString: strerror(errno)))")
            }
            offset += written
        }
        bytes.removeAll(keepingCapacity: true)
    }
}

/// Standard input or output failed.
public struct LineIOError: Error, Sendable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// Writes a line to standard error.
public func printError(_ message: String) {
    var line = Array(message.utf8)
    line.append(UInt8(ascii: "\n"))
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

/// A line filter on standard input (`payload`, `decode`): `process` turns each line into one
/// output line (without its newline) and returns `false` when the line failed. Output is
/// flushed as input arrives. Returns how many lines failed.
public func runLineFilter(_ process: (UnsafeBufferPointer<UInt8>, inout JSONWriter) -> Bool) throws(LineIOError) -> Int {
    var output = OutputBuffer(descriptor: 1)
    var reader = LineReader(descriptor: 0)
    var writer = JSONWriter(capacity: 8192)
    var failures = 0
    var ioError: LineIOError?
    try reader.forEachLine({ line in
        writer.removeAll()
        if !process(line, &writer) { failures += 1 }
        writer.raw(UInt8(ascii: "\n"))
        writer.withUnsafeBytes { output.bytes.append(contentsOf: $0) }
    }, onChunkEnd: {
        do throws(LineIOError) { try output.flush() } catch { ioError = error }
    })
    try output.flush()
    if let ioError { throw ioError }
    return failures
}
