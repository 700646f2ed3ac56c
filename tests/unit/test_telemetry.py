"""OpenTelemetry spans from retrieval and model calls, read with an in-memory exporter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from collective.budget.report import BudgetReport, SectionUsage
from collective.errors import ConfigError
from collective.kb.demo import open_default_store
from collective.kb.retrieval import retrieve
from collective.telemetry import add_span_exporter, configure_telemetry, model_call_span


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    add_span_exporter(exporter)
    return exporter


def test_retrieval_emits_a_span_with_profile_attributes(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    store = open_default_store(tmp_path / "kb.sqlite")
    spans.clear()
    result = retrieve(store, "Why is ASA better than PETG outdoors, and how to print it?", "auto")
    (span,) = [s for s in spans.get_finished_spans() if s.name == "collective.retrieval"]
    attrs = dict(span.attributes or {})
    assert attrs["retrieval.requested"] == "auto"
    assert attrs["retrieval.applied"] == attrs["budget_profile"] == result.applied
    assert attrs["retrieval.reason"] == result.reason
    assert attrs["rewrite_attempts"] == len(result.rewrites) > 0
    assert attrs["candidate_count"] == result.candidates
    assert attrs["injected_count"] == len(result.injected)
    assert list(attrs["retrieval.injected_ids"]) == [c.id for c in result.injected]  # type: ignore[arg-type]
    assert attrs["latency_ms"] >= 0
    rewrites = [e for e in span.events if e.name == "retrieval.rewrite"]
    assert [e.attributes["query"] for e in rewrites] == result.rewrites  # type: ignore[index]


def test_model_call_span_carries_the_budget_report(spans: InMemorySpanExporter) -> None:
    report = BudgetReport(
        node="specialist",
        model="athene",
        n_ctx=32768,
        prompt_tokens=20000,
        max_output_tokens=6000,
        token_counter="llama-server /tokenize",
        sections=[SectionUsage("kb_chunks", allocated=15000, used=9200)],
        shared_tokens=19800,
        reused_tokens=19750,
    ).to_dict()
    spans.clear()
    with model_call_span("specialist", "athene", report, retrieval_profile="deep", member=2):
        pass
    (span,) = spans.get_finished_spans()
    attrs = dict(span.attributes or {})
    assert attrs["node"] == "specialist" and attrs["model"] == "athene"
    assert attrs["budget_profile"] == "deep" and attrs["member"] == 2
    assert attrs["retrieval.profile"] == "deep"  # the name that says which profile it is
    assert attrs["budget.n_ctx"] == 32768 and attrs["budget.prompt_tokens"] == 20000
    assert attrs["budget.fits"] is True
    assert attrs["budget.shared_tokens"] == 19800 and attrs["budget.reused_tokens"] == 19750
    assert attrs["budget.section.kb_chunks.allocated"] == 15000
    assert attrs["budget.section.kb_chunks.used"] == 9200
    (event,) = [e for e in span.events if e.name == "budget_report"]
    assert json.loads(event.attributes["report"]) == report  # type: ignore[index,arg-type]


def test_api_is_a_no_op_without_configuration() -> None:
    code = (
        "from collective.telemetry import tracer, configure_telemetry\n"
        "assert configure_telemetry('none') is None\n"
        "with tracer.start_as_current_span('x') as s: print(s.is_recording())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30
    )
    assert out.stdout.strip() == "False"


def test_console_exporter_prints_spans() -> None:
    code = (
        "from collective.telemetry import configure_telemetry, model_call_span\n"
        "configure_telemetry('console')\n"
        "with model_call_span('judge', 'gpt-oss'): pass\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30
    )
    assert '"name": "collective.model_call"' in out.stderr
    assert '"node": "judge"' in out.stderr


def test_otlp_without_its_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Simulates the optional extra being absent (it may be installed in a dev env).
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with pytest.raises(ConfigError, match=r"collective\[otlp\]"):
        configure_telemetry("otlp")
    with pytest.raises(ConfigError, match="unknown telemetry exporter"):
        configure_telemetry("zipkin")  # type: ignore[arg-type]
