"""Events about namespaces: namespaces (their labels, which affinity terms' namespaceSelector reads)."""

from __future__ import annotations

from schemas.events.base import Event

# --- namespaces (compacted, key = namespace name) ---------------------------------------------


class NamespaceEvent(Event, frozen=True, kw_only=True):
    """A namespace and its labels; `deleted` once it is gone (then a tombstone)."""

    name: str
    labels: dict[str, str] = {}
    deleted: bool = False
    observed_at: float = 0.0
