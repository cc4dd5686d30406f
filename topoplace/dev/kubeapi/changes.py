"""What the store tells its watchers: one change of the log, a watcher's inbox, what a selector lets it see."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import msgspec

from topoplace.dev.kubeapi.selectors import Selector

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"
_encoder = msgspec.json.Encoder()

Object = dict[str, Any]


class Change(msgspec.Struct):
    """One entry of the change log; `encoded` caches the object's JSON for every watcher."""

    revision: int
    type: str
    resource: str
    namespace: str
    obj: Object
    old: Object | None = None
    encoded: bytes | None = None

    def object_json(self) -> bytes:
        if self.encoded is None:
            self.encoded = _encoder.encode(self.obj)
        return self.encoded


Changes = list[Change]  # an alias: inside ObjectStore, `list` names its method


class Subscription:
    """A watcher's inbox of changes of one resource type (and namespace, when given)."""

    def __init__(self, resource: str, namespace: str | None, limit: int) -> None:
        self.resource = resource
        self.namespace = namespace
        self.limit = limit
        self.pending: deque[Change] = deque()
        self.wakeup = asyncio.Event()
        self.overflowed = False  # a watcher too slow to keep up is ended; it resumes from its last revision
        self.closed = False

    def offer(self, change: Change) -> None:
        if self.namespace is not None and change.namespace != self.namespace:
            return
        self.pending.append(change)
        if len(self.pending) > self.limit:
            self.overflowed = True
        self.wakeup.set()

    def close(self) -> None:
        self.closed = True
        self.wakeup.set()


def visible_change(change: Change, selector: Selector) -> str | None:
    """The event type a watcher with this selector sees, or None: entering the selection is ADDED, leaving it DELETED.

    The object it sees is always `change.obj`, so one cached encoding serves every watcher.
    """
    if selector.empty:
        return change.type
    if change.type == DELETED:
        return DELETED if selector.matches(change.obj) else None
    now = selector.matches(change.obj)
    before = change.old is not None and selector.matches(change.old)
    if now:
        return MODIFIED if before else ADDED
    return DELETED if before else None
