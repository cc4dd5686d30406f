"""Structured logs: one JSON object per line on stderr.

Call sites name the event and pass its data as fields:
    log.info("pod.placed", extra={"fields": {"pod": uid, "node": node}})
"""

from __future__ import annotations

import logging
import sys
import time
from typing import TextIO

import msgspec
from opentelemetry import trace

# Noisy at INFO (every connection and rebalance step); their warnings still show.
_QUIET_LOGGERS = ("aiokafka", "kafka", "aiohttp.access")


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service
        # enc_hook=str: a field of a type JSON lacks is shown as text, never drops the line
        self._encoder = msgspec.json.Encoder(enc_hook=str)

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "event": record.getMessage(),
        }
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            line["trace_id"] = f"{span.trace_id:032x}"
            line["span_id"] = f"{span.span_id:016x}"
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            for key, value in fields.items():
                line.setdefault(str(key), value)  # a field never hides the envelope
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return self._encoder.encode(line).decode()


class _OurHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Marks the handler configure_logging installed, so a second call replaces it."""


def configure_logging(service: str, level: str = "INFO", *, stream: TextIO | None = None) -> None:
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _OurHandler)]:
        root.removeHandler(handler)
    handler = _OurHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    root.addHandler(handler)
    root.setLevel(level.upper())
    quiet = max(logging.WARNING, logging.getLevelName(level.upper()))
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(quiet)
