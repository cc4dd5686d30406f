"""What a message is on the wire: an event of its topic as JSON, its key, its trace headers.

Pure: no broker, no event loop. The producer, the consumer and the follower of topoplace.kafka use it.
"""

from __future__ import annotations

import msgspec
from opentelemetry import propagate
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter

from schemas.events import MAX_EVENT_BYTES, SCHEMA_VERSION, Event
from schemas.topics import Topic

# --- encoding (pure) -------------------------------------------------------------------------

_encoder = msgspec.json.Encoder()


class EventTooLarge(ValueError):
    """An event over its kind's bound (`Event.max_bytes`): the object it describes is the problem."""

    def __init__(self, event: msgspec.Struct, size: int, bound: int) -> None:
        super().__init__(
            f"the event is {size:,} bytes as JSON, over the bound of {bound:,} for a {type(event).__name__}"
        )
        self.size = size
        self.bound = bound


def encode_event(event: msgspec.Struct) -> bytes:
    """The event as JSON; raises EventTooLarge past its bound (an Event's max_bytes; other Structs: the default)."""
    value = _encoder.encode(event)
    bound = event.max_bytes if isinstance(event, Event) else MAX_EVENT_BYTES
    if len(value) > bound:
        raise EventTooLarge(event, len(value), bound)
    return value


# --- decoding (pure) -------------------------------------------------------------------------


class RejectReason:
    """Kinds of rejection; the `reason` label of MESSAGES_DEAD_LETTERED."""

    MALFORMED_JSON = "malformed_json"
    INVALID_FIELD = "invalid_field"
    UNKNOWN_SCHEMA_VERSION = "unknown_schema_version"
    INVALID_EVENT = "invalid_event"  # decoded, but breaks its topic's rules (topoplace.event_checks)
    HANDLER_ERROR = "handler_error"


class DecodeError(ValueError):
    """A message that is not a valid event of its topic; `error` names the field and the reason."""

    def __init__(self, kind: str, error: str) -> None:
        super().__init__(error)
        self.kind = kind
        self.error = error


class _Versioned(msgspec.Struct):
    schema_version: int = SCHEMA_VERSION


_version_decoder = msgspec.json.Decoder(_Versioned)
_decoders: dict[type[Event], msgspec.json.Decoder[Event]] = {}


def decode_event(topic: Topic, value: bytes | None) -> Event | None:
    """The event of `topic` in `value` (None for a tombstone); raises DecodeError.

    The version is read first, so a message of an unknown version is reported
    as such rather than as whatever field its new shape breaks.
    """
    if value is None:
        return None
    try:
        version = _version_decoder.decode(value).schema_version
        if version != SCHEMA_VERSION:
            raise DecodeError(
                RejectReason.UNKNOWN_SCHEMA_VERSION,
                f"schema_version: unknown version {version}, this service reads version {SCHEMA_VERSION}",
            )
        decoder = _decoders.get(topic.event)
        if decoder is None:
            decoder = _decoders[topic.event] = msgspec.json.Decoder(topic.event)
        return decoder.decode(value)
    except msgspec.ValidationError as exc:
        raise DecodeError(RejectReason.INVALID_FIELD, _field_error(str(exc))) from None
    except msgspec.DecodeError as exc:
        raise DecodeError(RejectReason.MALFORMED_JSON, f"value: not JSON ({exc})") from None


def _field_error(message: str) -> str:
    """msgspec's "Expected `int`, got `str` - at `$.devices[0].index`" as "devices[0].index: expected ..."."""
    reason, sep, where = message.partition(" - at `")
    path = where.rstrip("`").removeprefix("$").removeprefix(".") if sep else ""
    reason = reason[:1].lower() + reason[1:]
    missing = "object missing required field `"
    if reason.startswith(missing):
        field = reason.removeprefix(missing).rstrip("`")
        return f"{path + '.' if path else ''}{field}: required field is missing"
    return f"{path or 'value'}: {reason}"


def decode_key(key: bytes | None) -> str | None:
    return key.decode("utf-8", errors="replace") if key is not None else None


# --- trace context in headers ----------------------------------------------------------------

Headers = tuple[tuple[str, bytes], ...]


class _HeaderGetter(Getter[Headers]):
    def get(self, carrier: Headers, key: str) -> list[str] | None:
        values = [v.decode("latin-1") for k, v in carrier if k.lower() == key and v is not None]
        return values or None

    def keys(self, carrier: Headers) -> list[str]:
        return [k for k, _ in carrier]


_header_getter = _HeaderGetter()


def trace_headers(ctx: Context | None = None) -> list[tuple[str, bytes]]:
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=ctx)
    return [(k, v.encode("latin-1")) for k, v in carrier.items()]


def extract_trace_context(headers: Headers) -> Context:
    return propagate.extract(headers, getter=_header_getter)
