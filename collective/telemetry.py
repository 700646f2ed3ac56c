"""OpenTelemetry spans for retrieval and model calls.

Call sites use only the OpenTelemetry API (`tracer`), which is a no-op until an SDK tracer
provider is installed: nothing is recorded or exported unless `configure_telemetry` (or
`add_span_exporter`) was called. `configure_telemetry("console")` prints spans to stderr;
`"otlp"` sends them over OTLP/HTTP (the `otlp` extra; endpoint from the standard
`OTEL_EXPORTER_OTLP_ENDPOINT` variable).

Attribute names (what a trace backend can filter on):

* retrieval span `collective.retrieval`: `budget_profile` (the applied retrieval profile, the
  same as `retrieval.applied`; the name is kept from the first release),
  `retrieval.requested`, `retrieval.applied`, `retrieval.reason`, `rewrite_attempts`,
  `candidate_count`, `injected_count`, `latency_ms`, `retrieval.injected_ids`; one
  `retrieval.rewrite` event per rewrite attempt.
* model-call span `collective.model_call`: `node`, `model`, `retrieval.profile` (the applied
  retrieval profile, also under its first-release name `budget_profile`), `budget.n_ctx`,
  `budget.prompt_tokens`, `budget.max_output_tokens`, `budget.token_counter`, `budget.fits`,
  `budget.section.<name>.allocated|used`, and a `budget_report` event whose `report` attribute is
  the whole report as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from opentelemetry import trace

from collective.errors import ConfigError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = [
    "Exporter",
    "add_span_exporter",
    "configure_telemetry",
    "model_call_span",
    "record_budget_report",
    "record_fallback",
    "record_preflight_fault",
    "record_replica_fault",
    "record_retrieval",
    "retrieval_span",
    "record_tool_call",
    "tracer",
]

Exporter = Literal["none", "console", "otlp"]

tracer = trace.get_tracer("collective")
"""The API tracer; a proxy that starts recording once an SDK provider is installed."""


def _sdk_provider() -> TracerProvider:
    """The global SDK tracer provider, installing one if the global is still the API no-op."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    provider = TracerProvider(resource=Resource.create({"service.name": "collective"}))
    trace.set_tracer_provider(provider)
    return provider


def add_span_exporter(exporter: SpanExporter, *, batch: bool = False) -> TracerProvider:
    """Send spans to `exporter` (installing the SDK provider on first use).

    Adding to an existing provider rather than replacing it is deliberate: OpenTelemetry lets
    the global provider be set only once per process.

    Args:
        exporter: Any SDK span exporter (console, OTLP, in-memory for tests).
        batch: Export in the background (for network exporters) instead of on span end.

    Returns:
        The SDK provider in use.
    """
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    provider = _sdk_provider()
    processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    return provider


def configure_telemetry(exporter: Exporter = "none") -> TracerProvider | None:
    """Configure where spans go.

    Args:
        exporter: `none` (the default: the API stays a no-op), `console` (spans as JSON on
            stderr) or `otlp` (OTLP/HTTP; needs `pip install 'collective[otlp]'`).

    Returns:
        The SDK provider, or None for `none`.

    Raises:
        ConfigError: Unknown exporter, or `otlp` without its package.
    """
    if exporter == "none":
        return None
    if exporter == "console":
        import sys

        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return add_span_exporter(ConsoleSpanExporter(out=sys.stderr))
    if exporter == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            raise ConfigError(
                "the OTLP exporter is not installed; run `pip install 'collective[otlp]'` "
                "or use --telemetry console"
            ) from exc
        return add_span_exporter(OTLPSpanExporter(), batch=True)
    raise ConfigError(f"unknown telemetry exporter {exporter!r}; use none, console or otlp")


def _attribute(value: Any) -> Any:
    """A value OpenTelemetry accepts as an attribute (scalars, homogeneous lists of scalars)."""
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    return json.dumps(value, default=str, sort_keys=True)


@contextmanager
def retrieval_span(
    requested: str, *, query_chars: int | None = None, **attributes: Any
) -> Iterator[trace.Span]:
    """A span around one retrieval; fill it with `record_retrieval` when the result is known.

    Args:
        requested: The profile asked for (`lean`, `balanced`, `deep`, `auto`).
        query_chars: The query's length (the query itself is not recorded: it may be private).
        **attributes: Extra attributes to set.
    """
    with tracer.start_as_current_span("collective.retrieval") as span:
        span.set_attribute("retrieval.requested", requested)
        if query_chars is not None:
            span.set_attribute("retrieval.query_chars", query_chars)
        for key, value in attributes.items():
            span.set_attribute(key, _attribute(value))
        yield span


def record_retrieval(span: trace.Span, result: Mapping[str, Any]) -> None:
    """Set a retrieval span's attributes from a `RetrievalResult.to_dict()`."""
    span.set_attribute("budget_profile", str(result["applied"]))
    span.set_attribute("retrieval.requested", str(result["requested"]))
    span.set_attribute("retrieval.applied", str(result["applied"]))
    span.set_attribute("retrieval.reason", str(result["reason"]))
    span.set_attribute("rewrite_attempts", len(result.get("rewrites", [])))
    span.set_attribute("candidate_count", int(result["candidates"]))
    span.set_attribute("injected_count", len(result["injected"]))
    span.set_attribute("latency_ms", float(result.get("latency_ms", 0.0)))
    span.set_attribute("retrieval.injected_ids", [str(i) for i in result["injected"]])
    if result.get("diagnostics"):
        span.set_attribute("retrieval.diagnostics", [str(d) for d in result["diagnostics"]])


def record_budget_report(span: trace.Span, report: Mapping[str, Any]) -> None:
    """Attach a budget report (`BudgetReport.to_dict()`) to a model-call span."""
    if not span.is_recording():  # no tracer configured: skip the JSON
        return
    for key in ("n_ctx", "prompt_tokens", "max_output_tokens", "token_counter", "scaled"):
        if key in report:
            span.set_attribute(f"budget.{key}", _attribute(report[key]))
    for key in ("shared_tokens", "reused_tokens"):  # the prefix shared, and reused by the server
        if report.get(key) is not None:
            span.set_attribute(f"budget.{key}", int(report[key]))
    if "fits" in report:
        span.set_attribute("budget.fits", bool(report["fits"]))
    for section in report.get("sections", []):
        name = section["name"]
        span.set_attribute(f"budget.section.{name}.allocated", int(section["allocated"]))
        span.set_attribute(f"budget.section.{name}.used", int(section["used"]))
    span.add_event("budget_report", {"report": json.dumps(report, default=str, sort_keys=True)})


@contextmanager
def model_call_span(
    node: str,
    model: str,
    budget_report: Mapping[str, Any] | None = None,
    *,
    retrieval_profile: str | None = None,
    **attributes: Any,
) -> Iterator[trace.Span]:
    """A span around one model call, carrying its budget report.

    Args:
        node: The graph node making the call (`specialist`, `judge`, ...).
        model: The model name.
        budget_report: `BudgetReport.to_dict()`; may instead be recorded later with
            `record_budget_report` once the prompt is assembled.
        retrieval_profile: The applied retrieval profile that sized the KB allocation (the
            span's `retrieval.profile`, and `budget_profile`, its name since the first release:
            not the memory budget profile, which is in the budget report).
        **attributes: Extra attributes (e.g. `member`).
    """
    with tracer.start_as_current_span("collective.model_call") as span:
        span.set_attribute("node", node)
        span.set_attribute("model", model)
        if retrieval_profile is not None:
            span.set_attribute("retrieval.profile", retrieval_profile)
            span.set_attribute("budget_profile", retrieval_profile)
        for key, value in attributes.items():
            span.set_attribute(key, _attribute(value))
        if budget_report is not None:
            record_budget_report(span, budget_report)
        yield span


def record_tool_call(
    name: str, arguments: Mapping[str, Any], result_chars: int, tokens: int
) -> None:
    """A span for one of the judge's verification tool calls."""
    with tracer.start_as_current_span("collective.tool_call") as span:
        span.set_attribute("tool.name", name)
        span.set_attribute("tool.arguments", json.dumps(dict(arguments), sort_keys=True))
        span.set_attribute("tool.result_chars", result_chars)
        span.set_attribute("tool.result_tokens", tokens)


def record_fallback(node: str, backend: str, error: BaseException) -> None:
    """A span for a backend that failed a node which then tried its next backend."""
    with tracer.start_as_current_span("collective.fallback") as span:
        span.set_attribute("node", node)
        span.set_attribute("backend", backend)
        span.set_attribute("error.type", type(error).__name__)
        span.set_attribute("error.message", str(error))
        span.set_status(trace.Status(trace.StatusCode.ERROR, str(error)))


def record_replica_fault(span: trace.Span, fault: Mapping[str, str]) -> None:
    """A `replica.fault` event on a model call's span: which replica, what failed, what instead."""
    span.add_event(
        "replica.fault",
        {
            "server": fault["server"],
            "failed": fault["failed"],
            "instead": fault.get("instead", ""),
        },
    )


def record_preflight_fault(roles: Sequence[str], fault: Mapping[str, str]) -> None:
    """A `collective.preflight` span for a replica down before the run (the run goes on)."""
    with tracer.start_as_current_span("collective.preflight") as span:
        span.set_attribute("roles", list(roles))
        record_replica_fault(span, fault)
