import Foundation
import PushFakes
import PushJSON
import PushTestSupport
import Testing

/// OpenTelemetry traces from `pushdispatch run` (issue 36), received by a real OTLP/HTTP
/// receiver (`Tests/tracing/otlp_receiver.py`, on the `opentelemetry-proto` package's
/// messages): a record that carries its write's `traceparent` gets a span in that trace, its
/// webhook delivery a span that is the record span's child and linked to it, and the webhook
/// request carries that attempt's context; a record without one, or with one that is not
/// valid, starts a trace of its own and is processed as any other.
@Suite("OpenTelemetry traces, as a process", .processLevel, .serialized)
struct TracingEndToEndTests {
    static var repository: URL { URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent() }
    static let traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
    static let parentID = "00f067aa0ba902b7"

    /// Starts the receiver; its port, once it listens.
    static func receiver(writingTo file: URL) throws -> (process: Process, port: Int) {
        let process = TestProcesses.make(
            command: "python3", [repository.appendingPathComponent("Tests/tracing/otlp_receiver.py").path, "--out", file.path])
        let out = Pipe()
        process.standardOutput = out
        process.standardInput = FileHandle.nullDevice
        try TestProcesses.launch(process)
        var text = ""
        while !text.contains("\n") {
            let data = out.fileHandleForReading.availableData
            if data.isEmpty { throw RunningService.ServiceError(message: "the OTLP receiver stopped before it listened") }
            text += String(decoding: data, as: UTF8.self)
        }
        guard let port = Int(text.split(separator: "\n")[0]) else { throw RunningService.ServiceError(message: "the OTLP receiver said \(text)") }
        return (process, port)
    }

    static func spans(_ file: URL) -> [JSON] {
        guard let text = try? String(contentsOf: file, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { try? JSONParser.parse(Array($0.utf8)) }
    }

    @Test("a record's traceparent → its span → the webhook attempt's span (child and link) → the webhook's traceparent")
    func recordToWebhook() async throws {
        try PythonPackages.require("opentelemetry.proto.collector.trace.v1.trace_service_pb2", package: "opentelemetry-proto")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-tracing-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let spansFile = folder.appendingPathComponent("spans.ndjson")
        let (receiver, receiverPort) = try Self.receiver(writingTo: spansFile)
        defer { receiver.terminate() }
        let fakes = try await FakeProviders.start(tls: true, webhooks: ["orders": ServiceEndToEndTests.webhookSecret])
        defer { Task { await fakes.stop() } }
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        try Data(
            """
            store: {sqlite: ./store.db}
            ingest: {queueFile: ./changes.ndjson, deadLetter: ./dead.ndjson}
            http: {port: 0}
            delivery: {caFile: "\(ProviderFixtures.root.appendingPathComponent("tls/ca.pem").path)", timeout: 60s}
            apps:
              toto:
                auth: {hs256Secret: "\(ServiceEndToEndTests.secret)"}
                webhooks: {orders: {url: "\(fakes.webhookURL("orders"))", secret: "\(ServiceEndToEndTests.webhookSecret)"}}
            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        #expect(FileManager.default.createFile(atPath: folder.appendingPathComponent("changes.ndjson").path, contents: nil))
        let service = try RunningService(
            config: config,
            environment: [
                "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:\(receiverPort)/v1/traces",
                "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_SERVICE_NAME": "pushdispatch-test",
            ])
        defer { _ = service.stop() }
        let port = try await service.port()
        try await ServiceEndToEndTests.eventually("ready") { try RunCommandTests.curl(["http://127.0.0.1:\(port)/readyz"]).status == 200 }
        // One subscription a record (on one, they could coalesce into one notification).
        for path in ["a", "b", "c"] {
            _ = try ServiceEndToEndTests.subscribe(port, #"{"kind":"webhook","mode":"value","path":"/\#(path)","destination":"orders","context":"crm-\#(path)"}"#)
        }
        try CrashTests.append(
            [
                #"{"seq":1,"app":"toto","op":"put","path":"/a","data":"traced","traceparent":"00-\#(Self.traceID)-\#(Self.parentID)-01"}"#,
                #"{"seq":2,"app":"toto","op":"put","path":"/b","data":"not traced"}"#,
                #"{"seq":3,"app":"toto","op":"put","path":"/c","data":"a bad traceparent","traceparent":"00-zz-not-a-context"}"#,
            ], to: folder)

        // Each record delivered (an invalid traceparent is ignored, never a reason to refuse).
        try await ServiceEndToEndTests.eventually("three webhook deliveries") {
            fakes.received(provider: "webhook").filter { $0.status == 200 }.count == 3
        }
        let hooks = fakes.received(provider: "webhook").filter { $0.status == 200 }
        try await ServiceEndToEndTests.eventually("three record spans and three delivery spans") {
            let spans = Self.spans(spansFile)
            return spans.filter { $0["name"]?.stringValue == "pushdispatch.record" }.count == 3
                && spans.filter { $0["name"]?.stringValue == "pushdispatch.delivery" }.count == 3
        }
        let spans = Self.spans(spansFile)
        func span(_ name: String, seq: Int64) throws -> JSON {
            try #require(spans.first { $0["name"]?.stringValue == name && $0["attributes"]?["pushdispatch.seq"]?.integerValue == seq }, "\(name) \(seq): \(spans)")
        }
        let record = try span("pushdispatch.record", seq: 1)
        #expect(record["traceId"]?.stringValue == Self.traceID && record["parentSpanId"]?.stringValue == Self.parentID, "\(record)")
        #expect(record["attributes"]?["pushdispatch.app"]?.stringValue == "toto" && record["attributes"]?["pushdispatch.notifications"]?.integerValue == 1)
        #expect(record["kind"]?.integerValue == 5 && record["service"]?.stringValue == "pushdispatch-test")  // SPAN_KIND_CONSUMER
        let delivery = try span("pushdispatch.delivery", seq: 1)
        let recordSpan = try #require(record["spanId"]?.stringValue)
        #expect(delivery["traceId"]?.stringValue == Self.traceID && delivery["parentSpanId"]?.stringValue == recordSpan, "\(delivery)")
        #expect(delivery["links"]?.arrayValue?.map { $0["spanId"]?.stringValue } == [recordSpan])
        #expect(delivery["kind"]?.integerValue == 3)  // SPAN_KIND_CLIENT
        let attributes = delivery["attributes"]
        #expect(attributes?["pushdispatch.provider"]?.stringValue == "webhook" && attributes?["pushdispatch.destination"]?.stringValue == "orders")
        #expect(attributes?["http.response.status_code"]?.integerValue == 200 && attributes?["pushdispatch.outcome"]?.stringValue == "delivered")
        #expect(attributes?["pushdispatch.attempt"]?.integerValue == 1)
        // The webhook got that attempt's context: the record's trace, the attempt's span.
        let traced = try #require(hooks.first { $0.headers["webhook-id"]?.hasSuffix("_1") == true })
        #expect(traced.headers["traceparent"] == "00-\(Self.traceID)-\(delivery["spanId"]?.stringValue ?? "?")-01")

        // Without a valid traceparent: a trace of the record's own, the delivery in it.
        for seq: Int64 in [2, 3] {
            let own = try span("pushdispatch.record", seq: seq)
            #expect(own["parentSpanId"]?.stringValue == "" && own["traceId"]?.stringValue != Self.traceID, "\(own)")
            let attempt = try span("pushdispatch.delivery", seq: seq)
            #expect(attempt["traceId"]?.stringValue == own["traceId"]?.stringValue && attempt["parentSpanId"]?.stringValue == own["spanId"]?.stringValue)
            let hook = try #require(hooks.first { $0.headers["webhook-id"]?.hasSuffix("_\(seq)") == true })
            #expect(hook.headers["traceparent"]?.hasPrefix("00-\(own["traceId"]?.stringValue ?? "?")-") == true)
        }
        // A bad traceparent is ignored quietly (OpenTelemetry would warn of each).
        #expect(!service.log.withLock { $0 }.contains("Failed to extract"))
        #expect(service.stop() == 0)
    }

    @Test("off by default: no span leaves, no traceparent on a webhook")
    func offByDefault() async throws {
        let fakes = try await FakeProviders.start(tls: true, webhooks: ["orders": ServiceEndToEndTests.webhookSecret])
        defer { Task { await fakes.stop() } }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-untraced-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        try Data(
            """
            store: {sqlite: ./store.db}
            ingest: {queueFile: ./changes.ndjson}
            http: {port: 0}
            delivery: {caFile: "\(ProviderFixtures.root.appendingPathComponent("tls/ca.pem").path)", timeout: 60s}
            apps:
              toto:
                auth: {hs256Secret: "\(ServiceEndToEndTests.secret)"}
                webhooks: {orders: {url: "\(fakes.webhookURL("orders"))", secret: "\(ServiceEndToEndTests.webhookSecret)"}}
            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        #expect(FileManager.default.createFile(atPath: folder.appendingPathComponent("changes.ndjson").path, contents: nil))
        let service = try RunningService(config: config)
        defer { _ = service.stop() }
        let port = try await service.port()
        try await ServiceEndToEndTests.eventually("ready") { try RunCommandTests.curl(["http://127.0.0.1:\(port)/readyz"]).status == 200 }
        _ = try ServiceEndToEndTests.subscribe(port, #"{"kind":"webhook","mode":"value","path":"/c","destination":"orders","context":"crm"}"#)
        try CrashTests.append([#"{"seq":1,"app":"toto","op":"put","path":"/c","data":1,"traceparent":"00-\#(Self.traceID)-\#(Self.parentID)-01"}"#], to: folder)
        try await ServiceEndToEndTests.eventually("delivered") { fakes.received(provider: "webhook").contains { $0.status == 200 } }
        #expect(fakes.received(provider: "webhook").allSatisfy { $0.headers["traceparent"] == nil })
        #expect(!service.log.withLock { $0 }.contains("tracing on"))
        #expect(service.stop() == 0)
    }

    @Test("OTLP over gRPC, which this build does not carry, stops the start with the reason")
    func grpcRefused() async throws {
        let folder = try RunCommandTests.folder()
        let config = folder.appendingPathComponent("pushdispatch.yaml").path
        try Data(
            """
            store: {sqlite: ./store.db}
            ingest: {queueFile: ./changes.ndjson}
            http: {port: 0}
            apps:
              toto:
                auth: {hs256Secret: "\(ServiceEndToEndTests.secret)"}
            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        #expect(FileManager.default.createFile(atPath: folder.appendingPathComponent("changes.ndjson").path, contents: nil))
        let service = try RunningService(config: config, environment: ["OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"])
        try await ServiceEndToEndTests.eventually("the service stopped by itself", timeout: 30) { !service.process.isRunning }
        #expect(service.process.terminationStatus != 0)
        #expect(service.log.withLock { $0 }.contains("exports traces over OTLP/HTTP only"), "\(service.log.withLock { $0 })")
    }
}
