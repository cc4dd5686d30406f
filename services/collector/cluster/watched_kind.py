"""One row of the cluster watcher's table of watched kinds (kinds.py), and what a row's tracker does."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from kubernetes_asyncio import client

from schemas import topics
from schemas.events import Event
from services.collector.cluster.trackers import KeyedTracker, Outcome
from topoplace.informer import ListFunction

if TYPE_CHECKING:  # the table's trackers: kinds.py imports this module
    from services.collector.cluster.kinds import Trackers

T = TypeVar("T")
E = TypeVar("E", bound=Event)


class Tracker(Protocol[T]):
    """What the watcher does with one kind's objects: a full list, one change, one deletion."""

    def relisted(self, objs: list[T], now: float, *, force: bool = False) -> Outcome: ...

    def observe(self, obj: T, now: float) -> Outcome: ...

    def gone(self, key: str, now: float) -> Outcome: ...


def _always(_obj: object) -> bool:
    return True


@dataclass(frozen=True)
class WatchedKind(Generic[T]):
    """One kind of API object the cluster watcher lists, watches and publishes."""

    name: str  # its readiness gate (and its informer's name when it has one version)
    object_type: type[T]  # the fields of it the watcher reads
    informers: Callable[[client.ApiClient], Sequence[tuple[str, ListFunction]]]  # (name, list call) per version
    tracker: Callable[[Trackers], Tracker[T]]
    key: Callable[[T], str]  # what a deletion is reported under
    counts: Callable[[T], bool] = _always  # an object that does not count is reported gone
    api_group: str | None = None  # an API group the cluster may lack (None: every cluster serves it)
    seed: Callable[[Trackers, Sequence[Event]], None] | None = None  # from `seeded_from`'s records at start
    seeded_from: topics.Topic | None = None
    from_file: bool = False  # --hypernodes-file stands in for the API


def keyed_seed(
    tracker: Callable[[Trackers], KeyedTracker[Any, E]], event_type: type[E], key: Callable[[E], str]
) -> Callable[[Trackers, Sequence[Event]], None]:
    """Seed a keyed tracker with the records not marked deleted."""

    def seed(t: Trackers, events: Sequence[Event]) -> None:
        # every event of a compacted topic the watcher seeds from says whether its object was deleted
        tracker(t).seed({key(e): e for e in events if isinstance(e, event_type) and not getattr(e, "deleted", False)})

    return seed
