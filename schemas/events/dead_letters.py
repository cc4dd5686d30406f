"""Dead letters: <topic>.dlq, a message that could not be decoded or handled."""

from __future__ import annotations

from schemas.events.base import Event

# --- <topic>.dlq (key = the original key) ---------------------------------------------------


class DeadLetterEvent(Event, frozen=True, kw_only=True):
    """A message that could not be decoded or handled, with the reason."""

    topic: str
    partition: int
    offset: int
    key: str | None = None
    value: str  # the original bytes, decoded as UTF-8 with replacement; cut to a bound when value_truncated
    error: str  # names the field and the reason
    service: str
    failed_at: float = 0.0
    value_size: int = 0  # bytes of the original value
    value_sha256: str = ""  # hex SHA-256 of the original bytes: finds the original when the value was cut
    value_truncated: bool = False
