"""OpenTelemetry tracing: one TracerProvider per service, exported to a JSON-lines file and/or OTLP.

Trace context crosses Kafka in message headers (see topoplace.kafka.wire) and the
Kubernetes API through the aiohttp-client instrumentation.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Sequence

import msgspec
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import Link, Span, SpanKind, Tracer
from opentelemetry.util.types import Attributes

from topoplace.config import Settings

try:  # a context manager that also decorates async functions correctly
    from opentelemetry.util._decorator import _agnosticcontextmanager
except ImportError:  # pragma: no cover - older or newer SDK layouts
    from contextlib import contextmanager as _agnosticcontextmanager  # type: ignore[assignment]

log = logging.getLogger(__name__)

# service name -> its provider. Production runs one service per process; tests
# and tools may run several, so the process-wide provider is a router: a span
# goes to the provider of the service named by get_tracer(name, service), else
# to the provider of its parent span's service (this is how the aiohttp-client
# spans of a Kubernetes call land with the service that made the call), else
# to the service set up last.
_providers: dict[str, TracerProvider] = {}
_configs: dict[str, tuple[object, ...]] = {}
_default_service: str | None = None
_lock = threading.Lock()
_global_installed = False


class SpanRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One finished span, one line of the traces file."""

    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_id: str | None
    name: str
    kind: str
    service_name: str = msgspec.field(name="service.name")
    start_unix_nano: int
    end_unix_nano: int
    duration_ms: float
    status: str
    attributes: dict[str, object] = {}
    events: tuple[str, ...] = ()


def span_record(span: ReadableSpan) -> SpanRecord:
    ctx = span.get_span_context()
    assert ctx is not None
    start = span.start_time or 0
    end = span.end_time or start
    return SpanRecord(
        trace_id=f"{ctx.trace_id:032x}",
        span_id=f"{ctx.span_id:016x}",
        parent_id=f"{span.parent.span_id:016x}" if span.parent is not None else None,
        name=span.name,
        kind=span.kind.name,
        service_name=str(span.resource.attributes.get("service.name", "")),
        start_unix_nano=start,
        end_unix_nano=end,
        duration_ms=(end - start) / 1e6,
        status=span.status.status_code.name,
        attributes={k: _plain(v) for k, v in (span.attributes or {}).items()},
        events=tuple(e.name for e in span.events),
    )


def _plain(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


class JsonLinesSpanExporter(SpanExporter):
    """Appends one JSON object per span to a file.

    Each line is written with a single write() in append mode, so several
    processes can share one file without interleaving lines.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._encoder = msgspec.json.Encoder()
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            with self._lock:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    for span in spans:
                        os.write(fd, self._encoder.encode(span_record(span)) + b"\n")
                finally:
                    os.close(fd)
        except OSError:
            log.exception("traces.file_write_failed", extra={"fields": {"path": self.path}})
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def read_spans(path: str) -> list[SpanRecord]:
    """Every span of a traces file (for tests and `topoplace` explain tools)."""
    decoder = msgspec.json.Decoder(SpanRecord)
    with open(path, "rb") as f:
        return [decoder.decode(line) for line in f if line.strip()]


def otlp_traces_url(settings: Settings) -> str | None:
    if settings.otlp_traces_endpoint:
        return settings.otlp_traces_endpoint
    if settings.otlp_endpoint:
        return settings.otlp_endpoint.rstrip("/") + "/v1/traces"
    return None


def setup_tracing(service_name: str, settings: Settings, *, set_global: bool = True) -> TracerProvider:
    """The TracerProvider of one service.

    Called again with the same exporters it returns the same provider; with
    other exporters (another traces file) it replaces it. set_global=False keeps
    it from becoming the fallback for spans of no known service (tests that
    must not catch others' spans); get_tracer(name, service_name) still uses it.
    """
    global _default_service
    config = (settings.traces_file, otlp_traces_url(settings), tuple(sorted(settings.resource_attributes.items())))
    with _lock:
        existing = _providers.get(service_name)
        if existing is not None and _configs[service_name] == config:
            return existing
        provider = _new_provider(service_name, settings)
        _providers[service_name] = provider
        _configs[service_name] = config
        if set_global:
            _default_service = service_name
    if existing is not None:
        existing.shutdown()
    _install_router()
    return provider


def _new_provider(service_name: str, settings: Settings) -> TracerProvider:
    resource = Resource.create({**settings.resource_attributes, "service.name": service_name})
    provider = TracerProvider(resource=resource)
    if settings.traces_file:
        # Simple (synchronous) processor: a span is in the file the moment it
        # ends, which tests and `tail -f` rely on; a local append is cheap.
        provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(settings.traces_file)))
    url = otlp_traces_url(settings)
    if url:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url)))
    return provider


def _install_router() -> None:
    """Make the router the process-wide provider and instrument aiohttp-client, once."""
    global _global_installed
    with _lock:
        if _global_installed:
            return
        _global_installed = True
    trace.set_tracer_provider(_ROUTER)
    from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor

    instrumentor = AioHttpClientInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument(tracer_provider=_ROUTER)


def _provider_for(service: str | None, context: Context | None) -> TracerProvider | None:
    if service is not None and service in _providers:
        return _providers[service]
    parent = trace.get_current_span(context)
    resource = getattr(parent, "resource", None)
    if resource is not None:
        parent_service = resource.attributes.get("service.name")
        if isinstance(parent_service, str) and parent_service in _providers:
            return _providers[parent_service]
    return _providers.get(_default_service) if _default_service is not None else None


class _RoutingTracer(Tracer):
    """Picks the service's provider when a span starts, so it never holds a replaced one."""

    def __init__(self, name: str, service: str | None, version: str | None = None) -> None:
        self._name = name
        self._service = service
        self._version = version
        # The provider's tracer, kept while that provider stays: the SDK builds a new one per call
        # (about 3 % of the binder's CPU under load, in a profile).
        self._last: tuple[TracerProvider, Tracer] | None = None

    def _tracer(self, context: Context | None) -> Tracer:
        provider = _provider_for(self._service, context)
        if provider is None:
            return _NOOP_TRACER
        last = self._last
        if last is not None and last[0] is provider:
            return last[1]
        tracer = provider.get_tracer(self._name, self._version)
        self._last = (provider, tracer)
        return tracer

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> Span:
        return self._tracer(context).start_span(
            name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
        )

    @_agnosticcontextmanager
    def start_as_current_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[Span]:
        with self._tracer(context).start_as_current_span(
            name,
            context,
            kind,
            attributes,
            links,
            start_time,
            record_exception,
            set_status_on_exception,
            end_on_exit,
        ) as span:
            yield span


class _Router(trace.TracerProvider):
    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: Attributes = None,
    ) -> Tracer:
        return _RoutingTracer(instrumenting_module_name, None, instrumenting_library_version)


_ROUTER = _Router()
_NOOP_TRACER = trace.NoOpTracer()


def get_tracer(name: str, service: str | None = None) -> Tracer:
    """A tracer writing to `service`'s provider (once it is set up), else as the router decides."""
    return _RoutingTracer(name, service)


def shutdown_tracing(service_name: str | None = None) -> None:
    """Flush every provider (no argument), or flush and close one service's.

    Without an argument nothing is closed: other services of this process may
    still be running. The SDK closes every provider at exit.
    """
    global _default_service
    if service_name is None:
        for provider in list(_providers.values()):
            provider.force_flush()
        return
    with _lock:
        closing = _providers.pop(service_name, None)
        _configs.pop(service_name, None)
        if _default_service == service_name:
            _default_service = next(reversed(_providers), None)
    if closing is not None:
        closing.force_flush()
        closing.shutdown()
