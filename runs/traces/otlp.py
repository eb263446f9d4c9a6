"""OTLP/HTTP trace requests in and responses out, protobuf or JSON.

The request is opentelemetry-proto's ``ExportTraceServiceRequest``. Its JSON
form is protobuf's JSON mapping except for trace and span ids, written in
hex rather than base64 (the OTLP specification): they are turned into base64
before protobuf's parser reads the rest. A body may be gzip-compressed
(``Content-Encoding: gzip``); it is inflated only up to the size limit.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
ID_FIELDS = ("traceId", "spanId", "parentSpanId")


class OtlpError(ValueError):
    """A body that is not an OTLP trace request; says what is wrong."""


@dataclass(slots=True)
class Span:
    """What evalsite reads of one span: its ids, times, status and attributes
    (the span's over its resource's)."""

    trace_id: str
    span_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    error_type: str = ""

    @property
    def started_at(self) -> datetime | None:
        if not self.start_ns:
            return None
        return datetime.fromtimestamp(self.start_ns / 1e9, tz=UTC)

    @property
    def latency_ms(self) -> float | None:
        if not self.start_ns or self.end_ns < self.start_ns:
            return None
        return (self.end_ns - self.start_ns) / 1e6


def inflate(body: bytes, encoding: str, limit: int) -> bytes:
    """The body as sent, inflated when gzip; OtlpError past ``limit`` bytes."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        data = body
    elif encoding == "gzip":
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            data = inflater.decompress(body, limit + 1)
        except zlib.error as exc:
            raise OtlpError(f"the gzip body does not inflate: {exc}") from None
    else:
        raise OtlpError(f"Content-Encoding {encoding!r} is not gzip or identity")
    if len(data) > limit:
        raise OtlpError(
            f"the request is over {limit:,} bytes (EVALSITE_MAX_OTLP_BYTES)"
        )
    return data


def parse_request(data: bytes, content_type: str) -> ExportTraceServiceRequest:
    """The request in either encoding; OtlpError saying why it is not one."""
    request = ExportTraceServiceRequest()
    kind = content_type.split(";")[0].strip().lower()
    if kind == PROTOBUF:
        try:
            request.ParseFromString(data)
        except DecodeError as exc:
            raise OtlpError(f"the protobuf body does not decode: {exc}") from None
        return request
    if kind != JSON:
        raise OtlpError(f"Content-Type must be {PROTOBUF} or {JSON}, not {kind!r}")
    try:
        document = json.loads(data)
    except ValueError as exc:
        raise OtlpError(f"the JSON body does not parse: {exc}") from None
    try:
        _ids_to_base64(document)
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError) as exc:
        raise OtlpError(f"the JSON body is not a trace request: {exc}") from None
    return request


def _ids_to_base64(document: Any) -> None:
    for resource in _list(document, "resourceSpans"):
        for scope in _list(resource, "scopeSpans"):
            for span in _list(scope, "spans"):
                for name in ID_FIELDS:
                    if isinstance(span.get(name), str) and span[name]:
                        try:
                            raw = bytes.fromhex(span[name])
                        except ValueError:
                            raise ValueError(
                                f"{name} {span[name]!r} is not hex"
                            ) from None
                        span[name] = base64.b64encode(raw).decode()


def _list(document: Any, key: str) -> list[Any]:
    value = document.get(key) if isinstance(document, dict) else None
    return value if isinstance(value, list) else []


def spans_of(request: ExportTraceServiceRequest) -> Iterator[Span]:
    """Every span of the request, its resource's attributes under its own."""
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield _span(span, resource)


def _span(span: ProtoSpan, resource: dict[str, Any]) -> Span:
    found = Span(
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        name=span.name,
        start_ns=span.start_time_unix_nano,
        end_ns=span.end_time_unix_nano,
        attributes={**resource, **attributes(span.attributes)},
    )
    if span.status.code == Status.STATUS_CODE_ERROR:
        found.error = span.status.message or "the span ended in error"
        found.error_type = str(found.attributes.get("error.type") or "SpanError")
        for event in span.events:
            if event.name == "exception":
                details = attributes(event.attributes)
                found.error = str(details.get("exception.message") or found.error)
                found.error_type = str(
                    details.get("exception.type") or found.error_type
                )
    return found


def attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: value(pair.value) for pair in pairs}


def value(any_value: AnyValue) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value(item) for item in any_value.array_value.values]
    if kind == "kvlist_value":
        return attributes(any_value.kvlist_value.values)
    if kind == "bytes_value":
        return any_value.bytes_value.hex()
    return getattr(any_value, kind) if kind else None


def response(content_type: str, rejected: int, message: str) -> tuple[bytes, str]:
    """The export response, in the request's encoding: rejected spans say why."""
    answer = ExportTraceServiceResponse()
    if rejected:
        answer.partial_success.rejected_spans = rejected
        answer.partial_success.error_message = message
    if content_type.split(";")[0].strip().lower() == PROTOBUF:
        return answer.SerializeToString(), PROTOBUF
    return json.dumps(json_format.MessageToDict(answer)).encode(), JSON
