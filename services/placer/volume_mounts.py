"""Which pods mount which PersistentVolumeClaims on which node, indexed both ways.

A pod mounts its claims on a node once it is bound there (pods.lifecycle) or, from this replica's view,
once it was placed there and not yet reported bound (kube-scheduler counts assumed pods). The storage view
asks for the claims of one node's pods (NodeVolumeLimits) and for the nodes whose pods mount some claims
(what a claim or volume change touches), each in time proportional to the answer, never to the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple


class Mounted(NamedTuple):
    """The claims (namespace/name) a pod mounts, on its node."""

    node: str
    claims: tuple[str, ...]


class VolumeMounts:
    """The claims each pod mounts, bound or placed, by pod, by node and by claim."""

    def __init__(self) -> None:
        self.bound: dict[str, Mounted] = {}  # pod uid -> its claims on the node it is bound to
        self.placed: dict[str, Mounted] = {}  # pod uid -> its claims on the node it was placed on, not yet bound
        self._by_node: dict[str, set[str]] = {}  # node -> pod uids mounting claims there
        self._by_claim: dict[str, set[str]] = {}  # claim -> pod uids mounting it

    def set_bound(self, uid: str, mounted: Mounted | None) -> None:
        self._change(uid, lambda: _set(self.bound, uid, mounted))

    def set_placed(self, uid: str, mounted: Mounted | None) -> None:
        self._change(uid, lambda: _set(self.placed, uid, mounted))

    def forget_placed(self, keep: Callable[[str], bool]) -> None:
        """Drop the placed pods `keep` no longer holds (their decision was dropped)."""
        for uid in [uid for uid in self.placed if not keep(uid)]:
            self.set_placed(uid, None)

    def on_node(self, node: str) -> Iterator[str]:
        """The claims the node's pods mount (a claim once per pod mounting it)."""
        for uid in self._by_node.get(node, ()):
            for mounted in self._of(uid):
                if mounted.node == node:
                    yield from mounted.claims

    def nodes_mounting(self, claims: Iterable[str]) -> set[str]:
        """The nodes where some pod mounts one of `claims`."""
        uids_by_claim = ((key, self._by_claim.get(key, ())) for key in claims)
        return {m.node for key, uids in uids_by_claim for uid in uids for m in self._of(uid) if key in m.claims}

    def nodes(self) -> set[str]:
        """Every node where some pod mounts claims."""
        return set(self._by_node)

    def _of(self, uid: str) -> list[Mounted]:
        return [m for m in (self.bound.get(uid), self.placed.get(uid)) if m is not None]

    def _change(self, uid: str, update: Callable[[], None]) -> None:
        for mounted in self._of(uid):
            _remove(self._by_node, mounted.node, uid)
            for key in mounted.claims:
                _remove(self._by_claim, key, uid)
        update()
        for mounted in self._of(uid):
            self._by_node.setdefault(mounted.node, set()).add(uid)
            for key in mounted.claims:
                self._by_claim.setdefault(key, set()).add(uid)


def _set(table: dict[str, Mounted], uid: str, mounted: Mounted | None) -> None:
    if mounted is None:
        table.pop(uid, None)
    else:
        table[uid] = mounted


def _remove(index: dict[str, set[str]], key: str, uid: str) -> None:
    uids = index.get(key)
    if uids is not None:
        uids.discard(uid)
        if not uids:
            del index[key]
