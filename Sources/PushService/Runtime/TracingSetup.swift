import Foundation
import Logging
import OTel
import PushTracing
import ServiceLifecycle

/// OpenTelemetry traces (issue 36), configured as OpenTelemetry's SDKs are, by the standard
/// `OTEL_*` variables, and off unless `OTEL_TRACES_EXPORTER` names `otlp` (and
/// `OTEL_SDK_DISABLED` is not `true`). On, spans are exported over OTLP/HTTP
/// (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, default
/// `http://localhost:4318/v1/traces`; `OTEL_EXPORTER_OTLP_PROTOCOL` `http/protobuf`, the default,
/// or `http/json`), sampled by `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG`, batched by
/// `OTEL_BSP_*`; `OTEL_SERVICE_NAME` defaults to `pushdispatch`. What cannot work (gRPC, which
/// this build does not carry; a value OpenTelemetry refuses) stops the start with the reason.
public enum TracingSetup {
    /// The spans' maker and the exporter's service (to run beside the others), or `nil` when
    /// tracing is off. (The benchmarks take their tracing from here too.)
    public static func make(environment: [String: String], logger: Logger) throws -> (traces: Traces, service: any Service)? {
        if environment["OTEL_SDK_DISABLED"]?.lowercased() == "true" { return nil }
        guard let exporters = environment["OTEL_TRACES_EXPORTER"]?.lowercased(),
            exporters.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == "otlp" })
        else { return nil }
        if let wire = environment["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] ?? environment["OTEL_EXPORTER_OTLP_PROTOCOL"], wire.lowercased() == "grpc" {
            throw TracingSetupError(
                message: "OTEL_EXPORTER_OTLP_PROTOCOL=grpc: this build exports traces over OTLP/HTTP only; set http/protobuf (the default) or http/json")
        }
        var configuration = OTel.Configuration.default
        configuration.serviceName = "pushdispatch"
        configuration.diagnosticLogger = .custom(logger)
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.enabled = true
        configuration.traces.exporter = .otlp
        do {
            let (tracer, service) = try OTel.makeTracingBackend(configuration: configuration)
            logger.info("tracing on: OpenTelemetry spans exported over OTLP/HTTP")
            return (Traces(tracer: tracer), service)
        } catch {
            throw TracingSetupError(message: "OpenTelemetry tracing (OTEL_TRACES_EXPORTER=otlp) cannot start: \(error)")
        }
    }
}

public struct TracingSetupError: Error, CustomStringConvertible {
    let message: String
    public var description: String { message }
}
