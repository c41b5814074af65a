import PushCore
import PushJSON

/// One change record (SPEC §4, §11.2): a write to an application's tree, or a revocation.
public struct ChangeRecord: Sendable {
    public enum Operation: Sendable {
        /// `put` or `patch`, validated and normalised.
        case write(TreeWrite)
        /// Revoke the application's subscriptions: only those at or below `path` when given,
        /// only those of `uid` when given.
        case revoke(path: Path?, uid: String?, reason: RevokeReason)
    }

    /// Strictly increasing per source.
    public let seq: Int64
    public let app: String
    public let operation: Operation
    /// `ts`: when the database committed the write, in milliseconds since the epoch.
    public let timestamp: Int64?
    /// `traceparent`: the write's W3C trace context, as given (a string; checked only where
    /// tracing is on, and an invalid one is ignored, never a reason to refuse the record).
    public let traceparent: String?

    public init(seq: Int64, app: String, operation: Operation, timestamp: Int64? = nil, traceparent: String? = nil) {
        self.seq = seq
        self.app = app
        self.operation = operation
        self.timestamp = timestamp
        self.traceparent = traceparent
    }
}

/// Why a line is not an acceptable change record: what was wrong, where, and what was expected.
public struct RecordError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Which part of the line is at fault: a closed set, whose ``label`` is the
    /// `pushdispatch_records_rejected_total{reason}` label (bounded, unlike the message).
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        private enum Code: String {
            case tooLong = "too_long"
            case notJSON = "not_json"
            case invalidApp = "invalid_app"
            case invalidSeq = "invalid_seq"
            case invalidOp = "invalid_op"
            case invalidTS = "invalid_ts"
            case invalidPath = "invalid_path"
            case invalidData = "invalid_data"
            case invalidUID = "invalid_uid"
            case invalidReason = "invalid_reason"
        }

        private let code: Code

        private init(_ code: Code) { self.code = code }

        /// The line is longer than a record may be.
        public static let tooLong = Kind(.tooLong)
        /// Not JSON, or not a JSON object.
        public static let notJSON = Kind(.notJSON)
        public static let invalidApp = Kind(.invalidApp)
        /// `seq` missing, not an integer, not after the source's last, or accepted already.
        public static let invalidSeq = Kind(.invalidSeq)
        public static let invalidOp = Kind(.invalidOp)
        public static let invalidTS = Kind(.invalidTS)
        public static let invalidPath = Kind(.invalidPath)
        public static let invalidData = Kind(.invalidData)
        public static let invalidUID = Kind(.invalidUID)
        public static let invalidReason = Kind(.invalidReason)

        /// The metric label.
        public var label: String { code.rawValue }
        public var description: String { code.rawValue }
    }

    public let kind: Kind
    /// The record's `seq` when it could be read (so that a socket client can match the answer).
    public let seq: Int64?
    /// What a person reads: what was wrong, where, and what was expected.
    public let reason: String

    public init(_ kind: Kind, _ reason: String, seq: Int64? = nil) {
        self.kind = kind
        self.reason = reason
        self.seq = seq
    }

    public var description: String { reason }
}

extension ChangeRecord {
    /// The record kinds of `op`.
    static let operations = ["put", "patch", "revoke"]

    /// Reads one line. Unknown fields are ignored (a database may add some); everything SPEC
    /// §4 and §11.2 ask for is checked.
    public static func parse(_ line: UnsafeBufferPointer<UInt8>) throws(RecordError) -> ChangeRecord {
        let json: JSON
        do {
            json = try JSONParser.parse(line)
        } catch {
            throw RecordError(.notJSON, error.description)
        }
        guard case .object(let object) = json else {
            throw RecordError(.notJSON, "a change record is a JSON object, got \(json.typeName)")
        }
        guard let seqValue = object[Key("seq")], !seqValue.isNull else {
            throw RecordError(.invalidSeq, "seq: missing; expected an integer")
        }
        guard case .int(let seq) = seqValue else {
            let hint = seqValue.typeName == "a number" ? " (an integer of at most 64 bits, without fraction or exponent)" : ""
            throw RecordError(.invalidSeq, "seq: expected an integer\(hint), got \(seqValue.excerpt)")
        }
        func fail(_ kind: RecordError.Kind, _ reason: String) -> RecordError { RecordError(kind, reason, seq: seq) }
        guard case .string(let app)? = object[Key("app")] else {
            throw fail(.invalidApp, object[Key("app")].map { "app: expected a string, got \($0.typeName)" } ?? "app: missing; expected the application id")
        }
        do {
            try AppID.validate(app, field: "app")
        } catch {
            throw fail(.invalidApp, error.message)
        }
        guard case .string(let op)? = object[Key("op")] else {
            throw fail(
                .invalidOp, object[Key("op")].map { "op: expected a string, got \($0.typeName)" } ?? "op: missing; expected \"put\", \"patch\" or \"revoke\"")
        }
        var timestamp: Int64?
        if let ts = object[Key("ts")], !ts.isNull {
            guard case .int(let value) = ts else { throw fail(.invalidTS, "ts: expected milliseconds since the epoch (an integer), got \(ts.excerpt)") }
            timestamp = value
        }
        let operation: Operation
        switch op {
        case "put", "patch":
            guard case .string(let pathText)? = object[Key("path")] else {
                throw fail(.invalidPath, object[Key("path")].map { "path: expected a string, got \($0.typeName)" } ?? "path: missing; a \(op) says where it writes")
            }
            let path: Path
            do {
                path = try Path(pathText)
            } catch {
                throw fail(.invalidPath, "path \(JSONWriter.quoted(pathText)): \(error)")
            }
            guard let data = object[Key("data")] else {
                throw fail(.invalidData, op == "put" ? "data: missing; a put carries the new value (null deletes)" : "data: missing; a patch carries an object of relative paths to values")
            }
            do {
                operation = .write(op == "put" ? try TreeWrite.put(at: path, data: data) : try TreeWrite.patch(at: path, data: data))
            } catch {
                throw fail(.invalidData, error.description)
            }
        case "revoke":
            var path: Path?
            if let value = object[Key("path")], !value.isNull {
                guard case .string(let pathText) = value else { throw fail(.invalidPath, "path: expected a string, got \(value.typeName)") }
                do {
                    path = try Path(pathText)
                } catch {
                    throw fail(.invalidPath, "path \(JSONWriter.quoted(pathText)): \(error)")
                }
            }
            var uid: String?
            if let value = object[Key("uid")], !value.isNull {
                guard case .string(let text) = value else { throw fail(.invalidUID, "uid: expected a string, got \(value.typeName)") }
                uid = text
            }
            let reasons = RevokeReason.recordReasons.map { JSONWriter.quoted($0.rawValue) }.joined(separator: ", ")
            guard case .string(let reasonText)? = object[Key("reason")], let reason = RevokeReason(rawValue: reasonText),
                RevokeReason.recordReasons.contains(reason)
            else {
                let got = object[Key("reason")].map { " got \($0.excerpt)" } ?? " it is missing"
                throw fail(.invalidReason, "reason: a revoke record gives one of \(reasons);\(got)")
            }
            operation = .revoke(path: path, uid: uid, reason: reason)
        default:
            throw fail(.invalidOp, "op: expected \"put\", \"patch\" or \"revoke\", got \(JSONWriter.quoted(op))")
        }
        var traceparent: String?
        if case .string(let text)? = object[Key("traceparent")] { traceparent = text }
        return ChangeRecord(seq: seq, app: app, operation: operation, timestamp: timestamp, traceparent: traceparent)
    }

    /// Reads one line given as bytes.
    public static func parse(_ line: [UInt8]) throws(RecordError) -> ChangeRecord {
        try line.withUnsafeBufferPointer { buffer throws(RecordError) in try parse(buffer) }
    }
}
