import PushJSON

/// Writes the v2 event object of SPEC §7.3 (also the `event` of webhook bodies, §8).
///
/// Fields in order: `t` ("v" data, "r" revocation), `m` (mode; data only), `a` (app), `p`
/// (subscription path), `s` (status; value and childEvent only), `v` (value; value mode with
/// status OK only), `c` (childEvent: `{"a":{…},"r":[…],"c":{…}}`), `r` (reason; revocation).
public enum EventWriter {
    public static func write(_ event: Event, status: PayloadStatus, into out: inout JSONWriter) {
        switch event.body {
        case .revoke(let reason):
            out.raw("{\"t\":\"r\",\"a\":")
            out.writeString(event.app)
            out.raw(",\"p\":")
            out.writeString(event.path)
            out.raw(",\"r\":")
            out.writeString(reason.rawValue)
            out.raw("}")
        case .noData:
            out.raw("{\"t\":\"v\",\"m\":\"noData\"")
            writeAppPath(event, &out)
            out.raw("}")
        case .value(let value):
            out.raw("{\"t\":\"v\",\"m\":\"value\"")
            writeAppPath(event, &out)
            out.raw(",\"s\":")
            out.writeString(status.rawValue)
            if status == .ok {
                out.raw(",\"v\":")
                out.write(value ?? .null)
            }
            out.raw("}")
        case .childEvent(let diff):
            out.raw("{\"t\":\"v\",\"m\":\"childEvent\"")
            writeAppPath(event, &out)
            out.raw(",\"s\":")
            out.writeString(status.rawValue)
            out.raw(",\"c\":{\"a\":")
            switch status {
            case .ok, .onlyKeys:
                let keysOnly = status == .onlyKeys
                ChildDiff.writeMembers(diff.added, keysOnly: keysOnly, into: &out)
                out.raw(",\"r\":")
                ChildDiff.writeKeys(diff.removed, into: &out)
                out.raw(",\"c\":")
                ChildDiff.writeMembers(diff.changed, keysOnly: keysOnly, into: &out)
            case .tooBig:
                out.raw("{},\"r\":[],\"c\":{}")
            }
            out.raw("}}")
        }
    }

    /// The statuses to try, best first: a noData event or a revocation has only one form.
    public static func statuses(for event: Event) -> [PayloadStatus] {
        switch event.body {
        case .noData, .revoke: return [.ok]
        case .value: return [.ok, .tooBig]
        case .childEvent: return [.ok, .onlyKeys, .tooBig]
        }
    }

    private static func writeAppPath(_ event: Event, _ out: inout JSONWriter) {
        out.raw(",\"a\":")
        out.writeString(event.app)
        out.raw(",\"p\":")
        out.writeString(event.path)
    }
}
