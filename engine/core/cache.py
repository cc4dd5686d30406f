"""Bounded memo tables: what the engine computed once and may reuse, bit for bit.

Everything kept here is a pure function of immutable inputs (a node's devices
and links, its load, the parsed request), so a hit returns exactly what a
recomputation would: decisions do not depend on what was cached before.
Every table is bounded (least recently used entries go first, or the oldest
for keys slow to hash), so a long-lived placer cannot grow without limit.

`disabled()` turns every table off for its block (tests compare the two
paths). The tables are per process and not locked: the engine is called from
one thread.
"""

from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
T = TypeVar("T")

_state = {"enabled": True}  # a dict, not a global statement: one mutable switch per process
_tables: weakref.WeakSet[BoundedCache[Any, Any]] = weakref.WeakSet()


def enabled() -> bool:
    return _state["enabled"]


@contextmanager
def disabled() -> Iterator[None]:
    """Compute everything afresh inside the block (the unoptimised path)."""
    before = _state["enabled"]
    _state["enabled"] = False
    try:
        yield
    finally:
        _state["enabled"] = before


def remembered(table: BoundedCache[K, V], key: Callable[[], K], compute: Callable[[], V]) -> V:
    """`compute()`, kept in `table` under `key()`; with the tables off, computed afresh and no key built."""
    if not enabled():
        return compute()
    at = key()
    found = table.get(at)
    if found is None:
        found = compute()
        table.put(at, found)
    return found


def clear_all() -> None:
    """Empty every table (tests start from a cold engine)."""
    for table in list(_tables):
        table.clear()


class BoundedCache(Generic[K, V]):
    """A mapping that keeps at most `bound` entries.

    `recency=True` drops the least recently used entry first. `recency=False` drops
    the oldest insertion first and never touches an entry on a hit: for keys that
    are slow to hash (a hit would hash them a second time to refresh them)."""

    def __init__(self, bound: int, *, recency: bool = True) -> None:
        if bound < 1:
            raise ValueError(f"bound must be at least 1, got {bound}")
        self.bound = bound
        self.recency = recency
        self._entries: OrderedDict[K, V] = OrderedDict()
        _tables.add(self)

    def get(self, key: K) -> V | None:
        value = self._entries.get(key)
        if value is not None and self.recency:
            self._entries.move_to_end(key)
        return value

    def get_many(self, keys: Iterable[K]) -> list[V | None]:
        """`get` for each key, in one loop (the node loop asks for thousands per decision)."""
        lookup = self._entries.get
        if not self.recency:
            return [lookup(key) for key in keys]
        refresh = self._entries.move_to_end
        out: list[V | None] = []
        for key in keys:
            value = lookup(key)
            if value is not None:
                refresh(key)
            out.append(value)
        return out

    def put(self, key: K, value: V) -> None:
        self._entries[key] = value
        if self.recency:
            self._entries.move_to_end(key)
        while len(self._entries) > self.bound:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()


class Interner(Generic[K]):
    """Equal values -> one small integer, so later keys hash and compare fast.

    An id is never given to a second value (ids only grow), so a key built from
    ids stays exact after its value was evicted and interned again."""

    _ids = itertools.count(1)  # shared: ids are unique across interners too

    def __init__(self, bound: int) -> None:
        self._table: BoundedCache[K, int] = BoundedCache(bound, recency=False)

    def id_of(self, value: K) -> int:
        found = self._table.get(value)
        if found is None:
            found = next(self._ids)
            self._table.put(value, found)
        return found

    def __len__(self) -> int:
        return len(self._table)

    def clear(self) -> None:
        self._table.clear()


class IdentityCache(Generic[T, V]):
    """Values keyed by an object's identity (for values that cannot be hashed cheaply).

    The entry holds the object itself, so its id cannot be reused while the entry
    lives; a lookup also checks `is`, so a reused id after eviction is a miss."""

    def __init__(self, bound: int) -> None:
        self._table: BoundedCache[int, tuple[T, V]] = BoundedCache(bound, recency=False)

    def get(self, obj: T) -> V | None:
        entry = self._table.get(id(obj))
        if entry is None or entry[0] is not obj:
            return None
        return entry[1]

    def get_many(self, objs: Sequence[T]) -> list[V | None]:
        entries = self._table.get_many(id(obj) for obj in objs)
        pairs = zip(objs, entries, strict=True)
        return [None if entry is None or entry[0] is not obj else entry[1] for obj, entry in pairs]

    def put(self, obj: T, value: V) -> None:
        self._table.put(id(obj), (obj, value))

    def __len__(self) -> int:
        return len(self._table)

    def clear(self) -> None:
        self._table.clear()
