"""The bind span joins the pod's trace; the API calls are its children; the outcome is sent inside it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from binder_support import RecordingProducer, placement_for
from kube_clients import client_for
from kubernetes_asyncio import client
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from schemas.events import BindingOutcome, DeviceAssignment
from services.binder.apply import PodBinder
from services.binder.handler import BIND_SPAN, BindingSteps, PlacementHandler
from services.binder.kube_events import EventRecorder
from services.binder.ledger import DeviceLedger
from services.binder.reporting import PodReporter
from topoplace import telemetry
from topoplace.config import Settings
from topoplace.dev.kubeapi import KubeApiServer


class Message(msgspec.Struct, frozen=True, kw_only=True):
    event: Any
    trace_context: otel_context.Context


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Finished spans of the process-wide provider (the one the aiohttp instrumentation reports to)."""
    provider = telemetry.setup_tracing("topoplace-binder", Settings())
    instrumentor = AioHttpClientInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument()
    assert isinstance(provider, TracerProvider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()  # the processor stays registered; a shut-down exporter drops what it gets


async def test_bind_span_joins_the_pod_trace_with_http_children(
    spans: InMemorySpanExporter, kube_api: KubeApiServer
) -> None:
    # Created after the instrumentation, so its aiohttp session is traced.
    api = client_for(kube_api.url)
    core = client.CoreV1Api(api)
    tracer = trace.get_tracer("test")
    producer = RecordingProducer()
    reporter = PodReporter(EventRecorder(core, component="topoplace"), watch=None)
    steps = BindingSteps(ledger=DeviceLedger(), binder=PodBinder(core), reporter=reporter)
    handler = PlacementHandler(steps=steps, producer=producer, tracer=tracer)
    pod = kube_api.store.create(
        "pods",
        {
            "metadata": {"name": "traced", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        },
        namespace="default",
    )
    devices = (DeviceAssignment(index=2), DeviceAssignment(index=3))
    with tracer.start_as_current_span("placer.decide") as upstream:
        upstream_context = trace.set_span_in_context(upstream)
    try:
        await handler(Message(event=placement_for(pod, "node-a", devices), trace_context=upstream_context))
        await reporter.drain()
    finally:
        await api.close()

    finished = spans.get_finished_spans()
    (bind,) = [s for s in finished if s.name == BIND_SPAN]
    upstream_ctx = upstream.get_span_context()
    assert bind.context.trace_id == upstream_ctx.trace_id
    assert bind.parent is not None and bind.parent.span_id == upstream_ctx.span_id
    attributes = dict(bind.attributes or {})
    assert attributes["pod"] == "default/traced"
    assert attributes["node"] == "node-a"
    assert attributes["devices"] == "2,3"
    assert attributes["outcome"] == BindingOutcome.BOUND.value
    assert attributes["attempts"] == 1

    http = [s for s in finished if s.kind is trace.SpanKind.CLIENT and s.context.trace_id == bind.context.trace_id]
    methods = sorted(
        str((s.attributes or {}).get("http.request.method", (s.attributes or {}).get("http.method"))) for s in http
    )
    assert methods == ["POST", "POST"]  # bind (with the annotations), then the Event in the background
    assert all(s.parent is not None and s.parent.span_id == bind.context.span_id for s in http)

    (sent,) = producer.sent
    assert (sent.trace_id, sent.span_id) == (bind.context.trace_id, bind.context.span_id)
