import PushCore
import PushJSON

/// Builds legacy v1 data payloads (SPEC §7.2) with the size rule of §7.4.
///
/// Field orders are fixed: noData `t app sp`; value `s t app sp d`; childEvent
/// `s t app sp added removed changed`; revoke `t r app sp`. `d`, `added`, `removed` and
/// `changed` carry compact JSON as strings, written in one pass (the JSON text escaped as it
/// is produced).
public struct V1PayloadBuilder: Sendable {
    private let limit: Int

    public init(limit: Int = PayloadLimit.bytes) {
        self.limit = limit
    }

    /// Appends the data payload of `event` to `out`; returns the status of a value or
    /// childEvent payload (`nil` for noData and revocations). `limit`: another bound than the
    /// builder's, for this payload (one that rides with more, as a Web Push notification).
    @discardableResult
    public func build(_ event: Event, into out: inout JSONWriter, limit: Int? = nil) -> PayloadStatus? {
        let limit = limit ?? self.limit
        let start = out.count
        switch event.body {
        case .noData:
            out.raw("{\"t\":\"noData\"")
            writeAppAndPath(event, &out)
            out.raw("}")
            return nil
        case .revoke(let reason):
            out.raw("{\"t\":\"revoke\",\"r\":")
            out.writeString(reason.rawValue)
            writeAppAndPath(event, &out)
            out.raw("}")
            return nil
        case .value(let value):
            out.raw("{\"s\":\"OK\",\"t\":\"value\"")
            writeAppAndPath(event, &out)
            out.raw(",\"d\":")
            out.writeAsJSONString(value ?? .null)
            out.raw("}")
            if out.count - start < limit { return .ok }
            out.truncate(to: start)
            out.raw("{\"s\":\"TooBig\",\"t\":\"value\"")
            writeAppAndPath(event, &out)
            out.raw("}")
            return .tooBig
        case .childEvent(let diff):
            for status in [PayloadStatus.ok, .onlyKeys] {
                writeChildEvent(event, diff, status: status, &out)
                if out.count - start < limit { return status }
                out.truncate(to: start)
            }
            writeChildEvent(event, diff, status: .tooBig, &out)
            return .tooBig
        }
    }

    /// The data payload of `event` as bytes, and its status.
    public func build(_ event: Event) -> (bytes: [UInt8], status: PayloadStatus?) {
        var out = JSONWriter(capacity: 512)
        let status = build(event, into: &out)
        return (out.bytes, status)
    }

    private func writeAppAndPath(_ event: Event, _ out: inout JSONWriter) {
        out.raw(",\"app\":")
        out.writeString(event.app)
        out.raw(",\"sp\":")
        out.writeString(event.path)
    }

    private func writeChildEvent(_ event: Event, _ diff: ChildDiff, status: PayloadStatus, _ out: inout JSONWriter) {
        out.raw("{\"s\":")
        out.writeString(status.rawValue)
        out.raw(",\"t\":\"childEvent\"")
        writeAppAndPath(event, &out)
        if status == .tooBig {
            out.raw(",\"added\":\"{}\",\"removed\":\"[]\",\"changed\":\"{}\"}")
            return
        }
        let keysOnly = status == .onlyKeys
        out.withSink { sink in
            sink.append(",\"added\":\"")
            ChildDiff.writeMembers(diff.added, keysOnly: keysOnly, NestedLevel.self, &sink)
            sink.append("\",\"removed\":\"")
            ChildDiff.writeKeys(diff.removed, NestedLevel.self, &sink)
            sink.append("\",\"changed\":\"")
            ChildDiff.writeMembers(diff.changed, keysOnly: keysOnly, NestedLevel.self, &sink)
            sink.append("\"}")
        }
    }
}
