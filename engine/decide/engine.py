"""The engine as an object: its vendors, its limits, and every memo table it keeps.

    engine = Engine(registry, Limits())      # the placer keeps one for its life
    engine.place(snapshot, request, mode)    # the index of the snapshot (the last one updated), one decision
    engine.place_in(index, request, mode)    # over an index the caller keeps current
    engine.place_gang(index, tree, gang)     # a gang inside one network domain
    engine.choose_devices(node, request)     # one node's devices, computed afresh
    engine.preempt(snapshot, preemptor, running, budgets)  # where it runs by evicting lower-priority pods
    engine.preempt_gang(index, tree, gang, priority, running)  # a gang, inside one network domain

Everything an engine remembers is its own: two engines in one process share
nothing, and an engine with `Limits(caches=False)` gives the same answers as
one with its tables (only slower). The registry is read once: a vendor
package that is missing fails when the registry is built, not at a pod.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from engine.cluster.index import ClusterIndex, DeviceClasses, NodeReads
from engine.cluster.network import NetworkTree
from engine.core.errors import RequestError
from engine.core.limits import Limits
from engine.core.memo import Memo
from engine.core.model import Decision, Mode, NodeState, PodRequest, Snapshot, WorkloadClass
from engine.core.node_key import NodeKeys
from engine.decide.gang import GangClaims, GangDecision, GangRequest, place_gang
from engine.decide.gang.slots import SlotTables
from engine.decide.node_rules import NodeFactsTable
from engine.decide.parts import DecisionParts
from engine.decide.pod import place_indexed
from engine.decide.preempt.choose import preempt
from engine.decide.preempt.gang import GangPreemption, RunningGroups, preempt_gang
from engine.decide.preempt.model import DisruptionBudget, Preemption, Preemptor, RunningPod
from engine.decide.preempt.room import Room
from engine.decide.preempt.search import PodsByNode
from engine.decide.ranking import ClassAnswers
from engine.node.answer import NodeAnswers, NodeMiss
from engine.node.dra.cel_programs import CelPrograms
from engine.node.fragmentation import reads_cpu
from engine.node.registry import VendorContext, VendorRegistry
from engine.node.vendor import SetCandidate
from engine.node.vendors import registry as default_registry


class DeviceChoice(msgspec.Struct, frozen=True, kw_only=True):
    """One node's answer (`topoplace engine pick`): devices in order, score, other sets."""

    node: str
    devices: tuple[int, ...] = ()
    score: float = 0.0  # the set's internal score (NVIDIA: the pair-score sum)
    score_parts: dict[str, float] = {}
    alternatives: tuple[SetCandidate, ...] = ()
    reason: str = ""  # set when nothing fits
    warnings: tuple[str, ...] = ()


def node_reads(registry: VendorRegistry, *, cpu: bool = False) -> NodeReads:
    """What the registry's vendors read of a node (`cpu`: and its CPU, which the fragmentation policy weighs
    when the workload's classes name CPU)."""
    labels, annotations = registry.node_reads
    return NodeReads(labels=labels, annotations=annotations, resources=cpu)


class _NodeLevel:
    """The node level of an engine: plugins, node policies and node answers over one memo."""

    def __init__(self, registry: VendorRegistry, limits: Limits) -> None:
        self.memo = Memo(enabled=limits.caches)
        self.keys = NodeKeys(self.memo)
        self.policies = registry.build_policies(self.memo)
        context = VendorContext(memo=self.memo, keys=self.keys, limits=limits, policies=self.policies)
        self.vendors = registry.build(context)
        self.answers = NodeAnswers(self.memo, self.keys, self.policies)


class Engine:
    """Places pods and gangs on a cluster; owns its plugins and its memo tables (see the module docstring)."""

    def __init__(self, registry: VendorRegistry | None = None, limits: Limits | None = None) -> None:
        self.registry = registry if registry is not None else default_registry
        self.limits = limits if limits is not None else Limits()
        self._node = _NodeLevel(self.registry, self.limits)
        # `choose_devices` computes afresh (one node has nothing to share), with plugins of its own.
        self._afresh = _NodeLevel(self.registry, msgspec.structs.replace(self.limits, caches=False))
        self.vendors = self._node.vendors
        self.classes = DeviceClasses()  # the class ids of every index this engine makes
        memo, answers = self._node.memo, self._node.answers
        self._parts = DecisionParts(
            vendors=self.vendors,
            node=answers,
            classes=ClassAnswers(memo, answers),
            facts=NodeFactsTable(self.limits.scoring),
            slots=SlotTables(memo, answers),
        )
        self._reads = node_reads(self.registry)
        self._reads_cpu = node_reads(self.registry, cpu=True)
        self._last_index: ClusterIndex | None = None  # the last snapshot's index: the next one updates it
        # DRA selectors compiled once, and what each selected of a device, in this engine's memo
        self.dra_programs = CelPrograms(memo.table(1024), memo.table(65536, recency=False))
        self._pods_by_node: PodsByNode | None = None  # the last preemption's running pods, by node
        self._running_groups: RunningGroups | None = None  # the last gang preemption's running pods

    @property
    def memo(self) -> Memo:
        return self._node.memo

    @property
    def keys(self) -> NodeKeys:
        return self._node.keys

    @property
    def node_answers(self) -> NodeAnswers:
        """The node answers this engine keeps (the per-node reference loop asks them directly)."""
        return self._node.answers

    # --- indexes ------------------------------------------------------------------------------

    def new_index(self, *, cpu: bool = False) -> ClusterIndex:
        """An empty index reading what the vendors read of a node (`cpu`: and its CPU), with this engine's
        class ids (so answers carry over between its indexes)."""
        return ClusterIndex(self._reads_cpu if cpu else self._reads, classes=self.classes)

    def index_of(self, snapshot: Snapshot) -> ClusterIndex:
        """The cluster index of `snapshot` (the previous snapshot's, updated where nodes differ)."""
        reads = self._reads_cpu if reads_cpu(snapshot.workload) else self._reads
        try:
            index = ClusterIndex.of(snapshot, reads, self._last_index, classes=self.classes)
        except ValueError as exc:
            self._last_index = None
            raise RequestError("snapshot.nodes", f"node {exc.args[0]!r} appears twice") from None
        self._last_index = index
        return index

    # --- decisions ----------------------------------------------------------------------------

    def place(
        self, snapshot: Snapshot, request: PodRequest, mode: Mode = Mode.DEFAULT, *, explain: bool = False
    ) -> Decision:
        """The best node and devices for `request`, or node None with the reason.

        `explain` lists every other node with why it lost (`Decision.alternatives`).
        Raises RequestError(field, reason) when the request cannot be read."""
        index = self.index_of(snapshot)
        return place_indexed(self._parts, index, request, mode, workload=snapshot.workload, explain=explain)

    def place_in(
        self,
        index: ClusterIndex,
        request: PodRequest,
        mode: Mode = Mode.DEFAULT,
        *,
        workload: tuple[WorkloadClass, ...] = (),
        explain: bool = False,
        runners_up: int = 0,
    ) -> Decision:
        """`place` over an index the caller keeps current (the placer's view does).

        `runners_up`: also the best few other nodes that fit, with why they lost (`Decision.alternatives`)."""
        return place_indexed(
            self._parts, index, request, mode, workload=workload, explain=explain, runners_up=runners_up
        )

    def place_gang(
        self,
        index: ClusterIndex,
        tree: NetworkTree,
        gang: GangRequest,
        mode: Mode = Mode.DEFAULT,
        *,
        workload: tuple[WorkloadClass, ...] = (),
        claims: GangClaims | None = None,
    ) -> GangDecision:
        """Every pending member of `gang` inside one network domain of `tree`, or none (with the reason)."""
        return place_gang(
            self._parts, index, tree, gang, mode, workload=workload, claims=claims, programs=self.dra_programs
        )

    def preempt(
        self,
        snapshot: Snapshot,
        preemptor: Preemptor,
        running: Sequence[RunningPod],
        budgets: Sequence[DisruptionBudget] = (),
        mode: Mode = Mode.DEFAULT,
        *,
        every_node: bool = False,
    ) -> Preemption:
        """Where `preemptor` runs by evicting lower-priority `running` pods, and which (engine/decide/preempt/).

        The running pods by node are kept while `snapshot.nodes` and `running` stay the same objects.
        `every_node`: try every node, not only those that can still win (the same answer, slower).
        Raises RequestError(field, reason) when the request cannot be read."""
        cpu = reads_cpu(snapshot.workload)
        room = Room(self._parts, preemptor.request, mode, snapshot.workload, cpu=cpu)

        def place_on(node: NodeState) -> Decision:
            index = self.new_index(cpu=cpu)
            index.upsert(node)
            return self.place_in(index, preemptor.request, mode, workload=snapshot.workload)

        pods = self._pods_by_node
        if pods is None or not pods.matches(snapshot, running):
            pods = self._pods_by_node = PodsByNode(snapshot, running)
        return preempt(room, snapshot, preemptor, running, budgets, place_on, pods, every_node=every_node)

    def preempt_gang(
        self,
        index: ClusterIndex,
        tree: NetworkTree,
        gang: GangRequest,
        priority: int,
        running: Sequence[RunningPod],
        budgets: Sequence[DisruptionBudget] = (),
        mode: Mode = Mode.DEFAULT,
        *,
        policy: str = "",
        workload: tuple[WorkloadClass, ...] = (),
    ) -> GangPreemption:
        """Where `gang` (of `priority`, its `policy` spec.preemptionPolicy) runs whole by evicting
        lower-priority `running` pods inside one network domain of `tree`, and which (preempt/gang.py).

        The running pods by node and pod group are kept while `running` stays the same object.
        Raises RequestError(field, reason) for a member or constraint that cannot be read."""
        cpu = reads_cpu(workload)
        return preempt_gang(
            self._parts,
            index,
            lambda: self.new_index(cpu=cpu),
            tree,
            gang,
            priority,
            running,
            budgets,
            mode,
            policy=policy,
            workload=workload,
            groups=self._running_groups_of(running),
        )

    def _running_groups_of(self, running: Sequence[RunningPod]) -> RunningGroups:
        """The running pods by node and pod group, kept while `running` stays the same object."""
        groups = self._running_groups
        if groups is None or not groups.matches(running):
            groups = self._running_groups = RunningGroups(running)
        return groups

    def choose_devices(self, node: NodeState, request: PodRequest, mode: Mode = Mode.DEFAULT) -> DeviceChoice:
        """The devices one node would give `request` (the node answer's step, on its own).

        Computed afresh, without the memo tables: one node has nothing to share, and
        `bench.search_speed` times exactly this step."""
        claimed = self._afresh.vendors.claim(request)
        if claimed is None:
            raise RequestError("requests", "asks for no device resource of a known vendor")
        plugin, device_request = claimed
        result = self._afresh.answers.named(plugin, device_request, node, mode)
        if isinstance(result, NodeMiss):
            return DeviceChoice(node=node.name, reason=result.unfit.reason, warnings=result.warnings)
        return DeviceChoice(
            node=node.name,
            devices=result.choice.devices,
            score=result.choice.set_score,
            score_parts=dict(result.choice.parts),
            alternatives=result.choice.runners_up,
            warnings=result.warnings,
        )

    def clear(self) -> None:
        """Forget everything remembered: a cold engine (its indexes stay valid)."""
        self._node.memo.clear()
        self._parts.classes.clear()
        self._parts.slots.clear()
        self._parts.facts.clear()
        self._parts.feasible.clear()
        self._parts.resource_rankings.clear()
        self._last_index = None
