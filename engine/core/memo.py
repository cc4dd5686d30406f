"""Bounded memo tables: what an engine computed once and may reuse, bit for bit.

Everything kept here is a pure function of immutable inputs (a node's devices
and links, its load, the parsed request), so a hit returns exactly what a
recomputation would: decisions do not depend on what was cached before.
Every table is bounded (least recently used entries go first, or the oldest
for keys slow to hash), so a long-lived placer cannot grow without limit.

A `Memo` is one engine's set of tables: it makes them, switches them on or off
together (`enabled`: off = every answer computed afresh, the reference path
tests compare with) and empties them together. Nothing here is shared between
engines; an engine is called from one thread, so nothing is locked.
"""

from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
T = TypeVar("T")


class Memo:
    """One engine's memo tables: made here, on or off together, emptied together."""

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self.ids: Iterator[int] = itertools.count(1)  # one id sequence for every interner of this memo
        self._tables: weakref.WeakSet[BoundedCache[Any, Any]] = weakref.WeakSet()

    def table(self, bound: int, *, recency: bool = True) -> BoundedCache[Any, Any]:
        """A new bounded table of this memo (emptied by `clear`)."""
        table: BoundedCache[Any, Any] = BoundedCache(bound, recency=recency)
        self._tables.add(table)
        return table

    def interner(self, bound: int) -> Interner[Any]:
        interner: Interner[Any] = Interner(bound, ids=self.ids)
        self._tables.add(interner.entries)
        return interner

    def identity(self, bound: int) -> IdentityCache[Any, Any]:
        cache: IdentityCache[Any, Any] = IdentityCache(bound)
        self._tables.add(cache.entries)
        return cache

    def remembered(self, table: BoundedCache[K, V], key: Callable[[], K], compute: Callable[[], V]) -> V:
        """`compute()`, kept in `table` under `key()`; with the memo off, computed afresh and no key built."""
        if not self.enabled:
            return compute()
        at = key()
        found = table.get(at)
        if found is None:
            found = compute()
            table.put(at, found)
        return found

    def entries(self) -> int:
        """Entries in all tables of this memo (0: nothing remembered)."""
        return sum(len(table) for table in list(self._tables))

    def clear(self) -> None:
        """Empty every table of this memo (a cold engine)."""
        for table in list(self._tables):
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

    def __init__(self, bound: int, *, ids: Iterator[int] | None = None) -> None:
        """`ids`: the id sequence, shared by the interners of one memo (their ids are then unique across them)."""
        self.entries: BoundedCache[K, int] = BoundedCache(bound, recency=False)
        self._ids = ids if ids is not None else itertools.count(1)

    def id_of(self, value: K) -> int:
        found = self.entries.get(value)
        if found is None:
            found = next(self._ids)
            self.entries.put(value, found)
        return found

    def __len__(self) -> int:
        return len(self.entries)

    def clear(self) -> None:
        self.entries.clear()


class IdentityCache(Generic[T, V]):
    """Values keyed by an object's identity (for values that cannot be hashed cheaply).

    The entry holds the object itself, so its id cannot be reused while the entry
    lives; a lookup also checks `is`, so a reused id after eviction is a miss."""

    def __init__(self, bound: int) -> None:
        self.entries: BoundedCache[int, tuple[T, V]] = BoundedCache(bound, recency=False)

    def get(self, obj: T) -> V | None:
        entry = self.entries.get(id(obj))
        if entry is None or entry[0] is not obj:
            return None
        return entry[1]

    def get_many(self, objs: Sequence[T]) -> list[V | None]:
        entries = self.entries.get_many(id(obj) for obj in objs)
        pairs = zip(objs, entries, strict=True)
        return [None if entry is None or entry[0] is not obj else entry[1] for obj, entry in pairs]

    def put(self, obj: T, value: V) -> None:
        self.entries.put(id(obj), (obj, value))

    def __len__(self) -> int:
        return len(self.entries)

    def clear(self) -> None:
        self.entries.clear()
