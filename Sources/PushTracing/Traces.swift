import Synchronization
import Tracing

/// What the service traces, in OpenTelemetry's terms (issue 36): a span for each record, from
/// the batch that took it to the commit that made it durable, and a span for each delivery
/// attempt, a child of its record's span and linked to it. A record that carries its write's
/// W3C trace context (`traceparent`, SPEC §4) gets a span in that trace, so a database that
/// traces its writes sees the push as part of the same trace; a webhook request carries the
/// attempt's context in its own `traceparent` header.
///
/// The service holds one only when tracing is on (`OTEL_TRACES_EXPORTER=otlp`): off, nothing
/// here runs, per record or per attempt.
///
/// An attempt finds its record's context in memory (``RecordContexts``), by application and
/// seq: an attempt after a restart, or on another instance than the one that took the record,
/// starts a trace of its own (docs/decisions.md).
public final class Traces: Sendable {
    public let tracer: any Tracer
    let records: RecordContexts

    public init(tracer: any Tracer, remembering capacity: Int = RecordContexts.defaultCapacity) {
        self.tracer = tracer
        records = RecordContexts(capacity: capacity)
    }

    /// The span names.
    public static let recordSpan = "pushdispatch.record"
    public static let attemptSpan = "pushdispatch.delivery"

    // MARK: - Records

    /// A record's span, started.
    public struct RecordSpan: Sendable {
        public let app: String
        public let seq: Int64
        let span: any Span
    }

    /// Starts the span of record `seq` of `app`, at `milliseconds` (when its batch was taken),
    /// in the trace of `traceparent` when it is valid (else in a trace of its own), and keeps
    /// its context for the record's delivery attempts.
    public func startRecord(app: String, seq: Int64, source: String, traceparent: String?, at milliseconds: Int64) -> RecordSpan {
        let parent = context(traceparent)
        let span = tracer.startSpan(Self.recordSpan, context: parent, ofKind: .consumer, at: Self.instant(milliseconds))
        // A span the sampler left out is not recorded: nothing to describe. Its context is kept
        // all the same, so that its attempts are left out too (a parent-based sampler).
        if span.isRecording {
            span.attributes["pushdispatch.app"] = app
            span.attributes["pushdispatch.seq"] = seq
            span.attributes["pushdispatch.source"] = source
        }
        records.keep(app: app, seq: seq, context: span.context)
        return RecordSpan(app: app, seq: seq, span: span)
    }

    /// Ends a record's span once its batch committed (`committed`), with the number of
    /// notifications it queued; or, when the batch could not be committed, as an error.
    public func endRecord(_ record: RecordSpan, notifications: Int, committed: Bool) {
        if record.span.isRecording {
            record.span.attributes["pushdispatch.notifications"] = notifications
            if !committed { record.span.setStatus(SpanStatus(code: .error, message: "the batch was not committed")) }
        }
        record.span.end()
    }

    // MARK: - Delivery attempts

    /// A delivery attempt's span, started; `traceparent` is its context, for a request that
    /// carries it (asked for: a webhook's).
    public struct AttemptSpan: Sendable {
        let span: any Span
        public let traceparent: String?
    }

    /// Starts the span of an attempt at notification `notification`: the child of the span of
    /// record `seq` of `app`, and linked to it, when that record's context is known here.
    /// `carried`: the request carries the attempt's `traceparent` (a webhook's).
    public func startAttempt(
        app: String, seq: Int64?, notification: Int64, subscription: String, provider: String, destination: String?, attempt: Int, carried: Bool
    ) -> AttemptSpan {
        let record = seq.flatMap { records.context(app: app, seq: $0) }
        let span = tracer.startSpan(Self.attemptSpan, context: record ?? .topLevel, ofKind: .client)
        if span.isRecording {
            if let record { span.addLink(SpanLink(context: record, attributes: SpanAttributes())) }
            span.attributes["pushdispatch.app"] = app
            if let seq { span.attributes["pushdispatch.seq"] = seq }
            span.attributes["pushdispatch.notification"] = notification
            span.attributes["pushdispatch.subscription"] = subscription
            span.attributes["pushdispatch.provider"] = provider
            if let destination { span.attributes["pushdispatch.destination"] = destination }
            span.attributes["pushdispatch.attempt"] = attempt
        }
        return AttemptSpan(span: span, traceparent: carried ? header(of: span.context) : nil)
    }

    /// Ends an attempt's span with the provider's answer: its HTTP status (none when no answer
    /// came) and the outcome (`delivered`, `retry`, `revoked`, `failed`).
    public func endAttempt(_ attempt: AttemptSpan, status: Int?, outcome: String, reason: String?) {
        if attempt.span.isRecording {
            if let status { attempt.span.attributes["http.response.status_code"] = status }
            attempt.span.attributes["pushdispatch.outcome"] = outcome
            if outcome != "delivered" { attempt.span.setStatus(SpanStatus(code: .error, message: reason)) }
        }
        attempt.span.end()
    }

    // MARK: - W3C trace context

    /// The context of `traceparent` (`00-<trace id>-<span id>-<flags>`); the top level when
    /// there is none or it is not valid (never a reason to refuse anything, SPEC §4).
    func context(_ traceparent: String?) -> ServiceContext {
        var context = ServiceContext.topLevel
        // Checked here first: OpenTelemetry would log each one it cannot read, and a stream of
        // records with bad values would be a stream of warnings.
        guard let traceparent, Self.isValid(traceparent) else { return context }
        tracer.extract(["traceparent": traceparent], into: &context, using: Headers())
        return context
    }

    /// Whether `text` is a W3C `traceparent` a tracer can continue: version (2 hex digits, not
    /// `ff`), trace id (32), parent id (16), flags (2), lower-case hex separated by `-`; version
    /// `00` exactly that long, a later version possibly followed by `-` and more.
    static func isValid(_ text: String) -> Bool {
        let bytes = Array(text.utf8.prefix(257))
        guard bytes.count >= 55, bytes.count <= 256, bytes[2] == 0x2D, bytes[35] == 0x2D, bytes[52] == 0x2D else { return false }
        func hex(_ range: Range<Int>) -> Bool { bytes[range].allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) } }
        func zeros(_ range: Range<Int>) -> Bool { bytes[range].allSatisfy { $0 == 0x30 } }
        guard hex(0..<2), hex(3..<35), hex(36..<52), hex(53..<55), !zeros(3..<35), !zeros(36..<52) else { return false }
        if bytes[0] == 0x66 && bytes[1] == 0x66 { return false }
        if bytes[0] == 0x30 && bytes[1] == 0x30 { return bytes.count == 55 }
        return bytes.count == 55 || bytes[55] == 0x2D
    }

    /// The `traceparent` of `context`, as a request would carry it.
    func header(of context: ServiceContext) -> String? {
        var headers: [String: String] = [:]
        tracer.inject(context, into: &headers, using: Headers())
        return headers["traceparent"]
    }

    struct Headers: Extractor, Injector {
        func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
        func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) { carrier[key] = value }
    }

    static func instant(_ milliseconds: Int64) -> DefaultTracerClock.Instant {
        DefaultTracerClock.Instant(nanosecondsSinceEpoch: UInt64(clamping: milliseconds).multipliedReportingOverflow(by: 1_000_000).partialValue)
    }
}

/// The span contexts of the most recent records, by application and seq: what a delivery
/// attempt continues (kept as values: no text to write and read again per attempt). Bounded: past ``defaultCapacity`` records, the oldest are
/// forgotten (their attempts then start traces of their own).
public final class RecordContexts: Sendable {
    public static let defaultCapacity = 65_536

    struct Key: Hashable {
        var app: String
        var seq: Int64
    }

    struct State {
        /// The context of each record kept, and the slot of the ring it holds.
        var contexts: [Key: (context: ServiceContext, slot: Int)] = [:]
        var ring: [Key?]
        var next = 0
    }

    let state: Mutex<State>

    init(capacity: Int) {
        state = Mutex(State(ring: Array(repeating: nil, count: max(1, capacity))))
    }

    func keep(app: String, seq: Int64, context: ServiceContext) {
        let key = Key(app: app, seq: seq)
        state.withLock { state in
            if let old = state.ring[state.next], state.contexts[old]?.slot == state.next { state.contexts[old] = nil }
            state.ring[state.next] = key
            state.contexts[key] = (context, state.next)
            state.next = (state.next + 1) % state.ring.count
        }
    }

    func context(app: String, seq: Int64) -> ServiceContext? {
        state.withLock { $0.contexts[Key(app: app, seq: seq)]?.context }
    }
}
