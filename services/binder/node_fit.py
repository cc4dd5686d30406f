"""Whether a node's resources leave room for a pod, counted as kube-scheduler's NodeResourcesFit
counts them (pure).

The device ledger guards devices; this guards the node's allocatable (`cpu`, `memory`, `pods`,
extended resources such as `nvidia.com/gpu`). A pod fits when its requests, plus those of every
live pod the API server has on the node (the binder's watch), plus those of the pods this binder
is binding there right now, stay within what the Node allocates. Placers decide on their own
views; two of them can each give the last free GPU of a node away before either sees the other's
decision. This is where that is caught, before the Binding.

A pod being bound is *assumed* on its node until the watch shows it bound (or gone), so no window
opens between the binding's reply and the watch event. Only resources the Node lists are checked:
what it does not list is not this check's to judge (the placer refuses those pods).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from schemas.quantity import QuantityError, resource_milli

POD_SLOT = 1000  # every pod takes one of the node's `pods`, in milli-units

Requests = Mapping[str, int]  # resource -> milli-units


class NodeFit:
    def __init__(self) -> None:
        self._bound: dict[str, tuple[str, dict[str, int]]] = {}  # uid -> (node, requests): live pods on nodes
        self._used: dict[str, dict[str, int]] = {}  # node -> resource -> milli-units of its live pods
        self._assumed: dict[str, tuple[str, dict[str, int]]] = {}  # uid -> (node, requests): binds in flight

    # --- what the API server says ---------------------------------------------------------------

    def observe(self, uid: str, node: str, requests: Requests, *, live: bool) -> None:
        """A pod as the watch saw it: on `node` (or "" when not bound), live or not (finished, gone)."""
        self._unbind(uid)
        if node and live:
            counted = {**requests, "pods": POD_SLOT}
            self._bound[uid] = (node, counted)
            _add(self._used.setdefault(node, {}), counted, 1)
        if node or not live:
            self._assumed.pop(uid, None)  # the watch has it now: bound, or gone

    def forget_missing(self, listed: Iterable[str]) -> None:
        """A full list came: pods not in it are gone."""
        keep = set(listed)
        for uid in [uid for uid in self._bound if uid not in keep]:
            self._unbind(uid)
        for uid in [uid for uid in self._assumed if uid not in keep]:
            del self._assumed[uid]

    def _unbind(self, uid: str) -> None:
        old = self._bound.pop(uid, None)
        if old is not None:
            node, counted = old
            used = self._used[node]
            _add(used, counted, -1)
            if not any(used.values()):
                del self._used[node]

    # --- this binder's binds in flight ----------------------------------------------------------

    def assume(self, uid: str, node: str, requests: Requests) -> None:
        if self._bound.get(uid, ("", {}))[0] == node:
            return  # already counted as bound there
        self._assumed[uid] = (node, {**requests, "pods": POD_SLOT})

    def forget_assumed(self, uid: str) -> None:
        self._assumed.pop(uid, None)

    def settled_bound(self, uid: str) -> None:
        """The bind succeeded: the assumption stands until the watch shows the pod, unless it already has."""
        if uid in self._bound:
            self._assumed.pop(uid, None)

    # --- the check ------------------------------------------------------------------------------

    def shortfall(self, uid: str, node: str, requests: Requests, allocatable: Mapping[str, str]) -> str | None:
        """Why the pod does not fit on the node, in kube-scheduler's words; None when it does."""
        if self._bound.get(uid, ("", {}))[0] == node:
            return None  # on the node already: counted in what is used
        used = dict(self._used.get(node, {}))
        for other, (where, counted) in self._assumed.items():
            if where == node and other != uid:
                _add(used, counted, 1)
        wanted = {**requests, "pods": POD_SLOT}
        for resource in sorted(wanted):
            if resource not in allocatable or wanted[resource] <= 0:
                continue
            try:
                limit = resource_milli(resource, str(allocatable[resource]))
            except QuantityError:
                continue  # the Node's own field is unreadable: nothing to hold the pod to
            taken = used.get(resource, 0)
            if taken + wanted[resource] > limit:
                return (
                    f"Insufficient {resource} on node {node}: the pod requests {_show(wanted[resource])}, "
                    f"{_show(max(0, limit - taken))} of {_show(limit)} left by the pods there and being bound there"
                )
        return None


def _add(into: dict[str, int], amounts: Mapping[str, int], sign: int) -> None:
    for resource, amount in amounts.items():
        into[resource] = into.get(resource, 0) + sign * amount


def _show(milli: int) -> str:
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def milli_requests(quantities: Mapping[str, str | int | float]) -> dict[str, int]:
    """Quantities as the API writes them, in milli-units rounded as kube-scheduler (and the placer's
    engine) rounds them; an unreadable one is left out."""
    out: dict[str, int] = {}
    for resource, text in quantities.items():
        try:
            out[resource] = resource_milli(resource, str(text))
        except QuantityError:
            continue
    return out
