"""Which ResourceSlices an allocation on one node may use, gathered into pools; pure.

A slice serves the node when its `nodeName` is the node, its `nodeSelector` selects
the node, it says `allNodes`, or it has `perDeviceNodeSelection` (each device then
says it itself). A pool is (driver, pool name); only slices of its newest
generation count. The pool is incomplete while fewer slices of that generation
exist (on any node) than `resourceSliceCount` says, and invalid when two of its
slices publish the same device name: nothing is allocated from such a pool.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from engine.node.dra.model import (
    CounterSet,
    DeviceCounterConsumption,
    NodeSelector,
    NodeSelectorRequirement,
    NodeView,
    ResourceSlice,
)

NODE_NAME_FIELD = "metadata.name"


class Pool(msgspec.Struct, frozen=True, kw_only=True):
    driver: str
    name: str
    generation: int
    slices: tuple[ResourceSlice, ...]  # the newest generation's slices that serve the node
    incomplete: bool
    invalid: bool
    counter_sets: tuple[CounterSet, ...] = ()  # of every newest slice of the pool, on any node
    # what each device of the pool consumes (every newest slice, on any node): allocated
    # devices elsewhere use up the pool's counters too
    consumers: tuple[tuple[str, tuple[DeviceCounterConsumption, ...]], ...] = ()

    @property
    def text(self) -> str:
        return f"{self.driver}/{self.name}"


def _requirement_holds(requirement: NodeSelectorRequirement, value: str | None) -> bool:
    op = requirement.operator
    if op == "In":
        return value is not None and value in requirement.values
    if op == "NotIn":
        return value is None or value not in requirement.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(requirement.values) == 1:
        try:
            have, bound = int(value), int(requirement.values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def selector_matches(selector: NodeSelector, node: NodeView) -> bool:
    """core/v1 NodeSelector: any term; all of a term's requirements; an empty term selects nothing."""
    for term in selector.node_selector_terms:
        if not term.match_expressions and not term.match_fields:
            continue
        labels_ok = all(_requirement_holds(r, node.labels.get(r.key)) for r in term.match_expressions)
        fields_ok = all(
            _requirement_holds(r, node.name if r.key == NODE_NAME_FIELD else None) for r in term.match_fields
        )
        if labels_ok and fields_ok:
            return True
    return False


def node_matches(node: NodeView, node_name: str | None, all_nodes: bool | None, selector: NodeSelector | None) -> bool:
    if node_name is not None:
        return node_name == node.name
    if all_nodes:
        return True
    if selector is not None:
        return selector_matches(selector, node)
    return False


def _serves(slice_: ResourceSlice, node: NodeView) -> bool:
    spec = slice_.spec
    if spec.per_device_node_selection:
        return True  # each device is checked when it is selected
    return node_matches(node, spec.node_name, spec.all_nodes, spec.node_selector)


def gather_pools(slices: Iterable[ResourceSlice], node: NodeView) -> list[Pool]:
    """The pools with a slice serving the node, in (driver, pool) order."""
    newest: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in slices:
        key = (s.spec.driver, s.spec.pool.name)
        kept = newest.setdefault(key, [])
        if kept and s.spec.pool.generation < kept[0].spec.pool.generation:
            continue
        if kept and s.spec.pool.generation > kept[0].spec.pool.generation:
            kept.clear()  # an older generation is being replaced: it does not count
        kept.append(s)
    pools = []
    for (driver, name), kept in sorted(newest.items()):
        serving = tuple(s for s in kept if _serves(s, node))
        if not serving:
            continue
        names = [d.name for s in kept for d in s.spec.devices]
        pools.append(
            Pool(
                driver=driver,
                name=name,
                generation=kept[0].spec.pool.generation,
                slices=serving,
                incomplete=len(kept) < kept[0].spec.pool.resource_slice_count,
                invalid=len(names) != len(set(names)),
                counter_sets=tuple(c for s in kept for c in s.spec.shared_counters),
                consumers=tuple(
                    (d.name, d.consumes_counters) for s in kept for d in s.spec.devices if d.consumes_counters
                ),
            )
        )
    return pools
