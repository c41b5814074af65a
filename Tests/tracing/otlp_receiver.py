#!/usr/bin/env python3
"""A small OTLP/HTTP trace receiver for the tracing tests (TracingEndToEndTests).

Listens on 127.0.0.1 (an ephemeral port, printed as the first line of standard output), takes
`POST /v1/traces` in OTLP's protobuf (`application/x-protobuf`) or JSON encoding (decoded with
the `opentelemetry-proto` package's messages), and appends each span received to the file
named by --out, one JSON object per line: name, kind, traceId, spanId, parentSpanId (hex),
attributes, links, status, the resource's service.name.
"""
import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse


def value(any_value):
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    if kind in ("array_value", "kvlist_value"):
        return json_format.MessageToDict(getattr(any_value, kind))
    if kind == "bytes_value":
        return any_value.bytes_value.hex()
    return getattr(any_value, kind)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    arguments = parser.parse_args()
    out = open(arguments.out, "a", encoding="utf-8")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            request = ExportTraceServiceRequest()
            content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            if content_type == "application/json":
                json_format.Parse(body, request)
            else:
                request.ParseFromString(body)
            for resource_spans in request.resource_spans:
                service = {a.key: value(a.value) for a in resource_spans.resource.attributes}.get("service.name")
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        out.write(json.dumps({
                            "name": span.name,
                            "kind": span.kind,
                            "traceId": span.trace_id.hex(),
                            "spanId": span.span_id.hex(),
                            "parentSpanId": span.parent_span_id.hex(),
                            "attributes": {a.key: value(a.value) for a in span.attributes},
                            "links": [{"traceId": l.trace_id.hex(), "spanId": l.span_id.hex()} for l in span.links],
                            "status": span.status.code,
                            "start": span.start_time_unix_nano,
                            "end": span.end_time_unix_nano,
                            "service": service,
                        }) + "\n")
            out.flush()
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
