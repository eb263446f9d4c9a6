"""The OTLP/HTTP endpoint of instrumented agents: ``/api/v1/otlp/v1/traces``.

Point an OpenTelemetry exporter at ``<site>/api/v1/otlp`` with the header
``Authorization: Bearer <API key>``; it posts to ``/v1/traces`` beneath, in
protobuf or JSON. The answer is OTLP's: 200 with the spans refused, and
why, in ``partial_success``; 400 for a body that is not a trace request (not
retried by exporters); 503 with Retry-After while a span's result is not
stored yet (retried).
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from ninja import Router

from runs.traces.otlp import OtlpError, inflate, parse_request, response, spans_of
from runs.traces.services import RETRY_SECONDS, take_spans
from runs.web.api import ERRORS
from runs.web.requests import ApiRequest

otlp_router = Router(tags=["traces"])


@otlp_router.post("/v1/traces", response={200: None, **ERRORS, 503: None})
def export_traces(request: ApiRequest) -> HttpResponse:
    """Spans of an instrumented agent, attached as steps to the results they
    name (``evalsite.result_id``, or ``evalsite.run_id`` with
    ``evalsite.item_index`` and ``evalsite.epoch``, on a span, its resource
    or another span of its trace); OpenTelemetry's GenAI and OpenInference
    model and tool spans become model and tool steps."""
    content_type = request.headers.get("Content-Type", "")
    try:
        data = inflate(
            request.body,
            request.headers.get("Content-Encoding", ""),
            settings.EVALSITE_MAX_OTLP_BYTES,
        )
        spans = list(spans_of(parse_request(data, content_type)))
    except OtlpError as exc:
        return _error(400, str(exc))
    limit = settings.EVALSITE_MAX_OTLP_SPANS
    if len(spans) > limit:
        return _error(400, f"{len(spans):,} spans; at most {limit:,} a request")
    intake = take_spans(user=request.auth, spans=spans)
    if intake.later:
        answer = _error(503, "; ".join(intake.reasons))
        answer["Retry-After"] = str(RETRY_SECONDS)
        return answer
    body, kind = response(content_type, intake.rejected, "; ".join(intake.reasons))
    return HttpResponse(body, content_type=kind)


def _error(status: int, message: str) -> HttpResponse:
    return JsonResponse({"detail": message}, status=status)
