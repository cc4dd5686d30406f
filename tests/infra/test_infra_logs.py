"""configure_logging: one JSON object per line, fields merged, trace ids attached."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider

from topoplace.logs import configure_logging


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    out = io.StringIO()
    yield out
    root.handlers[:] = saved_handlers
    root.setLevel(saved_level)


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_one_json_line_per_event_with_fields(stream: io.StringIO) -> None:
    configure_logging("topoplace-placer", "INFO", stream=stream)
    log = logging.getLogger("services.placer")
    log.info("pod.placed", extra={"fields": {"pod": "uid-1", "node": "node-a", "devices": [0, 1]}})
    log.debug("hidden at INFO")
    (line,) = lines(stream)
    assert line["event"] == "pod.placed"
    assert line["level"] == "info"
    assert line["service"] == "topoplace-placer"
    assert line["logger"] == "services.placer"
    assert (line["pod"], line["node"], line["devices"]) == ("uid-1", "node-a", [0, 1])
    assert isinstance(line["ts"], str) and line["ts"].endswith("Z")


def test_a_field_never_hides_the_envelope_and_odd_values_still_log(stream: io.StringIO) -> None:
    configure_logging("svc", "DEBUG", stream=stream)
    logging.getLogger("x").debug("e", extra={"fields": {"service": "spoofed", "when": object}})
    (line,) = lines(stream)
    assert line["service"] == "svc"
    assert "object" in str(line["when"])


def test_exceptions_carry_their_traceback(stream: io.StringIO) -> None:
    configure_logging("svc", "INFO", stream=stream)
    try:
        raise ValueError("bad quantity")
    except ValueError:
        logging.getLogger("x").exception("request.rejected")
    (line,) = lines(stream)
    assert "ValueError: bad quantity" in str(line["exception"])


def test_trace_ids_of_the_current_span(stream: io.StringIO) -> None:
    configure_logging("svc", "INFO", stream=stream)
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("work") as span:
        logging.getLogger("x").info("inside")
    logging.getLogger("x").info("outside")
    inside, outside = lines(stream)
    assert inside["trace_id"] == f"{span.get_span_context().trace_id:032x}"
    assert inside["span_id"] == f"{span.get_span_context().span_id:016x}"
    assert "trace_id" not in outside


def test_configuring_twice_keeps_one_handler(stream: io.StringIO) -> None:
    configure_logging("first", "INFO", stream=stream)
    configure_logging("second", "INFO", stream=stream)
    logging.getLogger("x").warning("once")
    (line,) = lines(stream)
    assert line["service"] == "second"
