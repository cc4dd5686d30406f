"""Tracing setup: the JSON-lines traces file, per-service providers, OTLP endpoint rules."""

from __future__ import annotations

import uuid
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from opentelemetry.trace import Tracer

from topoplace.config import Settings
from topoplace.telemetry import (
    get_tracer,
    otlp_traces_url,
    read_spans,
    setup_tracing,
    shutdown_tracing,
)


def test_traces_file_has_one_span_per_line_with_parents_and_service(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    service = f"topoplace-test-{uuid.uuid4().hex[:6]}"
    settings = Settings(traces_file=str(path), resource_attributes={"deployment.environment": "test"})
    provider = setup_tracing(service, settings, set_global=False)
    assert setup_tracing(service, settings, set_global=False) is provider  # once per service
    tracer = get_tracer("test", service)
    with (
        tracer.start_as_current_span("placer.decide", attributes={"pod.uid": "uid-1"}) as parent,
        tracer.start_as_current_span("engine.place"),
    ):
        pass
    # SimpleSpanProcessor: both spans are in the file before any flush.
    spans = {s.name: s for s in read_spans(str(path))}
    assert len(path.read_text().splitlines()) == 2
    shutdown_tracing(service)

    decide, place = spans["placer.decide"], spans["engine.place"]
    assert decide.parent_id is None
    assert place.parent_id == decide.span_id == f"{parent.get_span_context().span_id:016x}"
    assert place.trace_id == decide.trace_id and len(decide.trace_id) == 32
    assert decide.service_name == place.service_name == service
    assert decide.attributes == {"pod.uid": "uid-1"}
    assert decide.end_unix_nano >= place.end_unix_nano >= place.start_unix_nano >= decide.start_unix_nano
    assert decide.kind == "INTERNAL" and decide.status == "UNSET"
    assert provider.resource.attributes["deployment.environment"] == "test"


def test_two_services_in_one_process_keep_their_names(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    settings = Settings(traces_file=str(path))
    names = [f"topoplace-a-{uuid.uuid4().hex[:6]}", f"topoplace-b-{uuid.uuid4().hex[:6]}"]
    for name in names:
        setup_tracing(name, settings, set_global=False)
        with get_tracer("test", name).start_as_current_span(f"work of {name}"):
            pass
    for name in names:
        shutdown_tracing(name)
    assert {s.name: s.service_name for s in read_spans(str(path))} == {f"work of {n}": n for n in names}


def test_otlp_traces_url_rules() -> None:
    assert otlp_traces_url(Settings()) is None
    assert otlp_traces_url(Settings(otlp_endpoint="http://jaeger:4318/")) == "http://jaeger:4318/v1/traces"
    assert (
        otlp_traces_url(Settings(otlp_endpoint="http://a:4318", otlp_traces_endpoint="http://b:4318/traces"))
        == "http://b:4318/traces"
    )


def test_setting_up_again_with_another_file_replaces_the_provider_for_existing_tracers(tmp_path: Path) -> None:
    service = f"topoplace-r-{uuid.uuid4().hex[:6]}"
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    tracer = get_tracer("test", service)  # taken before any setup, as services do at import
    one = setup_tracing(service, Settings(traces_file=str(first)), set_global=False)
    with tracer.start_as_current_span("run 1"):
        pass
    two = setup_tracing(service, Settings(traces_file=str(second)), set_global=False)
    assert two is not one
    with tracer.start_as_current_span("run 2"):
        pass
    shutdown_tracing()  # flushes only: the service keeps tracing
    with tracer.start_as_current_span("run 2, after flush"):
        pass
    shutdown_tracing(service)
    assert [s.name for s in read_spans(str(first))] == ["run 1"]
    assert [s.name for s in read_spans(str(second))] == ["run 2", "run 2, after flush"]


async def test_http_client_spans_belong_to_the_service_whose_span_is_their_parent(tmp_path: Path) -> None:
    seen_traceparent: list[str] = []

    async def echo(request: web.Request) -> web.Response:
        seen_traceparent.append(request.headers.get("traceparent", ""))
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/api/v1/pods", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/api/v1/pods"

    binder, other = f"topoplace-binder-{uuid.uuid4().hex[:6]}", f"topoplace-other-{uuid.uuid4().hex[:6]}"
    files = {binder: tmp_path / "binder.jsonl", other: tmp_path / "other.jsonl"}
    for name, path in files.items():
        setup_tracing(name, Settings(traces_file=str(path)), set_global=False)
    try:
        with get_tracer("test", binder).start_as_current_span("binder.bind") as parent:
            async with aiohttp.ClientSession() as http, http.get(url) as response:
                assert response.status == 200
    finally:
        for name in files:
            shutdown_tracing(name)
        await runner.cleanup()

    spans = read_spans(str(files[binder]))
    (client,) = [s for s in spans if s.kind == "CLIENT"]
    assert client.parent_id == f"{parent.get_span_context().span_id:016x}"
    assert client.service_name == binder
    (traceparent,) = seen_traceparent
    assert traceparent.split("-")[1:3] == [client.trace_id, client.span_id]
    assert not files[other].exists()


def test_a_tracer_asks_its_provider_for_the_sdk_tracer_once_while_the_provider_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = f"topoplace-c-{uuid.uuid4().hex[:6]}"
    tracer = get_tracer("test", service)
    provider = setup_tracing(service, Settings(traces_file=str(tmp_path / "t.jsonl")), set_global=False)
    asked: list[str] = []
    original = provider.get_tracer

    def counting(name: str, *args: object, **kwargs: object) -> Tracer:
        asked.append(name)
        return original(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(provider, "get_tracer", counting)
    for i in range(5):
        with tracer.start_as_current_span(f"span {i}"):
            pass
    shutdown_tracing(service)
    assert asked == ["test"]  # built once, not once per span
    assert [s.name for s in read_spans(str(tmp_path / "t.jsonl"))] == [f"span {i}" for i in range(5)]
