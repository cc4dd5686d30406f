"""One node's answer, the loop every vendor shares: node filter, device filter, vendor search, node score.

The decision level asks it through `NodeAnswers` (one per engine, its answers
kept in the engine's memo by node key, so twins share one answer); the node
score is the request's node policy over the vendor's measures (policy.py). The
pure helpers below (`check_unique`, `prefixed`) are public too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import msgspec

from engine.core.memo import BoundedCache, IdentityCache, Interner, Memo
from engine.core.model import Mode, NodeState
from engine.core.node_key import NodeKeys
from engine.node.explain import unfit_device_reason
from engine.node.policies.registry import NodePolicies
from engine.node.vendor import (
    DeviceLoad,
    DeviceRequest,
    NodeScore,
    NodeScratch,
    Rejection,
    RequestError,
    SetChoice,
    TopologyMaps,
    Unfit,
    VendorPlugin,
    device_loads,
    topology_maps,
)
from schemas.topology import Device

CORDONED = "node(s) were cordoned"
NOT_READY = "node(s) were not ready"


class NodeFit(msgspec.Struct, frozen=True, kw_only=True):
    node: str
    choice: SetChoice
    score: NodeScore
    warnings: tuple[str, ...] = ()


class NodeMiss(msgspec.Struct, frozen=True, kw_only=True):
    node: str
    unfit: Unfit
    warnings: tuple[str, ...] = ()


# Per-node answers, nameless (see node_key.py): (request id, node key) -> answer.
RESULT_BOUND = 16_384
REQUEST_BOUND = 1_024
TOPOLOGY_MAPS_BOUND = 1_024
LOADS_BOUND = 4_096  # device loads of the node states asked lately (a class state is asked once per request)
_NOT_READY = NodeMiss(node="", unfit=Unfit(reason="not ready", summary=NOT_READY))
_CORDONED = NodeMiss(node="", unfit=Unfit(reason="cordoned", summary=CORDONED))


class NodeAnswers:
    """One engine's node answers: computed by the shared loop below, kept in the engine's memo.

    An answer is nameless (node key, not node name: twins share it) until `named` puts the name back."""

    def __init__(self, memo: Memo, keys: NodeKeys, policies: NodePolicies) -> None:
        self.memo = memo
        self.keys = keys
        self.policies = policies
        self._results: BoundedCache[tuple[int, int], NodeFit | NodeMiss] = memo.table(RESULT_BOUND)
        self._requests: Interner[tuple[object, ...]] = memo.interner(REQUEST_BOUND)
        # Read-only maps, a function of the node's devices and links alone: shared by its twins.
        self._maps: BoundedCache[tuple[int, int], TopologyMaps] = memo.table(TOPOLOGY_MAPS_BOUND)
        # Read-only device loads by node state (identity): the index hands out one state per class, which
        # every request then evaluates.
        self._loads: IdentityCache[NodeState, Mapping[int, DeviceLoad]] = memo.identity(LOADS_BOUND)

    def named(self, plugin: VendorPlugin, request: DeviceRequest, node: NodeState, mode: Mode) -> NodeFit | NodeMiss:
        """One node's answer with its name: node filter, device filter, set search, node score."""
        return _named(self.outcome(plugin, request, node, mode, self.request_id_of(plugin, request, mode)), node.name)

    def request_id_of(self, plugin: VendorPlugin, request: DeviceRequest, mode: Mode) -> int | None:
        """The request's id for the answer tables; None = do not keep answers (memo off, or unhashable)."""
        if not self.memo.enabled:
            return None
        try:
            return self._requests.id_of((plugin, request, mode))
        except TypeError:  # a vendor request holding a list or dict: computed every time, still correct
            return None

    def outcome(
        self, plugin: VendorPlugin, request: DeviceRequest, node: NodeState, mode: Mode, request_id: int | None
    ) -> NodeFit | NodeMiss:
        """The node's answer without its name: warnings unprefixed, `node` empty."""
        if not node.ready:
            return _NOT_READY
        if node.unschedulable:
            return _CORDONED
        if request_id is None:
            return self.evaluate(plugin, request, node, mode)
        key = (request_id, self.keys.node_key(node))
        found = self._results.get(key)
        if found is None:
            found = self.evaluate(plugin, request, node, mode)
            self._results.put(key, found)
        return found

    def outcomes(
        self, plugin: VendorPlugin, request: DeviceRequest, nodes: Sequence[NodeState], mode: Mode
    ) -> list[NodeFit | NodeMiss]:
        """`outcome` for every node, the table lookups batched."""
        request_id = self.request_id_of(plugin, request, mode)
        if request_id is None:
            return [self.outcome(plugin, request, node, mode, None) for node in nodes]
        keys = [(request_id, key) for key in self.keys.node_keys(nodes)]
        answers: list[NodeFit | NodeMiss] = []
        for node, key, found in zip(nodes, keys, self._results.get_many(keys), strict=True):
            if found is None:
                found = self._results.get(key)  # a twin earlier in this loop may have answered it
            if found is None:
                found = self.outcome(plugin, request, node, mode, None)
                self._results.put(key, found)
            answers.append(found)
        return answers

    def maps(self, node: NodeState) -> TopologyMaps:
        return self.memo.remembered(self._maps, lambda: self.keys.topology_key(node), lambda: topology_maps(node))

    def scratch(self, node: NodeState, mode: Mode, maps: TopologyMaps | None = None) -> NodeScratch:
        if maps is None:
            maps = self.maps(node)
        if not self.memo.enabled:
            return NodeScratch.build(node, mode, maps)
        loads = self._loads.get(node)
        if loads is None:
            loads = device_loads(node, maps[0])
            self._loads.put(node, loads)
        return NodeScratch.build(node, mode, maps, loads)

    def evaluate(self, plugin: VendorPlugin, request: DeviceRequest, node: NodeState, mode: Mode) -> NodeFit | NodeMiss:
        """The node's nameless answer, computed now (readiness and cordon are the caller's)."""
        maps = self.maps(node)
        if request.count == 0:  # a pod without devices that the node policy still scores (vendor contract)
            nothing = SetChoice(assignments=())
            scratch = self.scratch(node, mode, maps)
            return NodeFit(node="", choice=nothing, score=self.score(plugin, scratch, request, nothing))
        own = tuple(d for d in maps[0].values() if d.vendor is plugin.vendor)
        insufficient = f"Insufficient {request.resource}"
        if not own:  # answered before any scratch is built: most classes of a mixed cluster, for most requests
            return NodeMiss(node="", unfit=Unfit(reason=f"no {request.device_noun} devices", summary=insufficient))
        scratch = self.scratch(node, mode, maps)
        usable: list[Device] = []
        rejected: list[tuple[Device, str]] = []
        classes: Counter[str] = Counter()
        for device in own:
            why = plugin.filter_device(scratch, request, device)
            if why is None:
                usable.append(device)
            elif isinstance(why, Rejection):
                rejected.append((device, why.reason))
                classes[why.summary] += 1
            else:
                rejected.append((device, why))
                classes[insufficient] += 1
        if len(usable) < request.count:
            reason = unfit_device_reason(request, len(own), len(usable), rejected)
            # A node with too few devices lacks the resource itself; one with enough devices
            # lacks what most of them were refused for (memory, cores, health...), ties by name.
            summary = insufficient
            if len(own) >= request.count and classes:
                summary = min(classes, key=lambda c: (-classes[c], c))
            return NodeMiss(node="", unfit=Unfit(reason=reason, summary=summary), warnings=tuple(scratch.warnings))
        outcome = plugin.search(scratch, request, tuple(usable))
        if isinstance(outcome, Unfit):
            return NodeMiss(node="", unfit=outcome, warnings=tuple(scratch.warnings))
        score = self.score(plugin, scratch, request, outcome)
        return NodeFit(node="", choice=outcome, score=score, warnings=tuple(scratch.warnings))

    def score(self, plugin: VendorPlugin, scratch: NodeScratch, request: DeviceRequest, choice: SetChoice) -> NodeScore:
        """The node's score: the request's node policy (in the scratch's mode) over the vendor's measures."""
        policy = self.policies.resolve(request.node_policy, scratch.mode)
        return policy.score(plugin.measures(scratch, request), choice)


def _named(result: NodeFit | NodeMiss, name: str) -> NodeFit | NodeMiss:
    warnings = prefixed(name, result.warnings)
    if isinstance(result, NodeFit):
        return NodeFit(node=name, choice=result.choice, score=result.score, warnings=warnings)
    return NodeMiss(node=name, unfit=result.unfit, warnings=warnings)


def prefixed(name: str, warnings: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"{name}: {w}" for w in warnings)


def check_unique(nodes: Sequence[NodeState]) -> None:
    for a, b in zip(nodes, nodes[1:], strict=False):
        if a.name == b.name:
            raise RequestError("snapshot.nodes", f"node {a.name!r} appears twice")
