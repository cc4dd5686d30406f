"""kube-scheduler's node filters, in its default order, as one chain compiled per pod.

The steps and their reasons, word for word from kube-scheduler
(pkg/scheduler/framework/plugins/...):

    NodeUnschedulable  "node(s) were unschedulable"   a cordoned node, unless the pod tolerates
                                                       node.kubernetes.io/unschedulable:NoSchedule
    NodeName           "node(s) didn't match the requested node name"
    TaintToleration    "node(s) had untolerated taint {<key>: <value>}"   (NoSchedule and NoExecute taints)
    NodeAffinity       "node(s) didn't match Pod's node affinity/selector"
    NodePorts          "node(s) didn't have free ports for the requested pod ports"   (ports.py)
    NodeResourcesFit   "Too many pods", "Insufficient cpu", "Insufficient <resource>" ... (all that apply)
    VolumeRestrictions  the pod's claims (volumes.py)
    NodeVolumeLimits   "node(s) exceed max volume count"   CSI attach limits (volume_limits.py)
    VolumeBinding, VolumeZone   the pod's claims (volumes.py)

As in kube, a node's check stops at the first step that fails. NodeAffinity's
PreFilter is honoured too: when the required affinity names its nodes
(matchFields metadata.name In), every other node fails with
"node(s) didn't satisfy plugin(s) [NodeAffinity]" without being checked, and
when the names exclude every node, `pre_filter_reason` holds kube's
"pod affinity terms conflict" (the whole message is then that reason, see
messages.fit_error_message); a volume rule that fails every node (a claim
missing, an unbound Immediate claim) is such a pre-filter reason too. Not
modelled: pod affinity, topology spread, DRA.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import msgspec

from engine.decide.kube.affinity import CONFLICT_REASON, NodeAffinityRules
from engine.decide.kube.ports import NODE_PORTS, NODE_PORTS_REASON, UsedPorts, fits_ports
from engine.decide.kube.resources import ResourceFit
from engine.decide.kube.taints import count_intolerable_prefer_no_schedule, first_untolerated, tolerated
from engine.decide.kube.volume_limits import MAX_VOLUME_COUNT_REASON, NODE_VOLUME_LIMITS, exceeds_volume_limits
from engine.decide.kube.volumes import VOLUME_BINDING, VOLUME_RESTRICTIONS, VOLUME_ZONE, volume_failure
from schemas.kube import NO_SCHEDULE, Affinity, HostPort, Taint, Toleration
from schemas.volumes import CsiVolume, VolumeRules

NODE_UNSCHEDULABLE = "NodeUnschedulable"
NODE_NAME = "NodeName"
TAINT_TOLERATION = "TaintToleration"
NODE_AFFINITY = "NodeAffinity"
NODE_RESOURCES_FIT = "NodeResourcesFit"
FILTER_ORDER = (
    NODE_UNSCHEDULABLE,
    NODE_NAME,
    TAINT_TOLERATION,
    NODE_AFFINITY,
    NODE_PORTS,
    NODE_RESOURCES_FIT,
    VOLUME_RESTRICTIONS,
    NODE_VOLUME_LIMITS,
    VOLUME_BINDING,
    VOLUME_ZONE,
)

UNSCHEDULABLE_REASON = "node(s) were unschedulable"
NODE_NAME_REASON = "node(s) didn't match the requested node name"
NODE_AFFINITY_REASON = "node(s) didn't match Pod's node affinity/selector"
NOT_NAMED_REASON = f"node(s) didn't satisfy plugin(s) [{NODE_AFFINITY}]"
UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect=NO_SCHEDULE)


def untolerated_taint_reason(taint: Taint) -> str:
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


class NodeFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What the filters read of one node. Amounts are milli-units (see resources.py)."""

    name: str
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False  # spec.unschedulable (cordoned)
    allocatable: dict[str, int] | None = None  # None = not reported: resources are not checked
    requested: dict[str, int] = msgspec.field(default_factory=dict)  # summed over the pods on the node
    pod_count: int = 0  # pods already on the node
    used_ports: UsedPorts | None = None  # host ports its pods hold (None: none)
    nonzero_requested: dict[str, int] | None = None  # cpu and memory with kube's scoring defaults (None: requested)
    image_sizes: dict[str, int] | None = None  # its images' sizes by name (None: none reported)
    csi_volume_limits: dict[str, int] | None = None  # CSINode: volumes per driver (None: no limits)
    csi_volumes: tuple[CsiVolume, ...] = ()  # the CSI volumes its pods use


class PodFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What the filters read of one pod. `requests` is its effective request in milli-units."""

    node_name: str = ""  # spec.nodeName: the pod may only run there
    node_selector: dict[str, str] = msgspec.field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    requests: dict[str, int] = msgspec.field(default_factory=dict)
    host_ports: tuple[HostPort, ...] = ()  # the host ports its containers take
    volumes: VolumeRules | None = None  # its claims, resolved against the cluster


Step = Callable[[NodeFacts], "list[str] | None"]


class CompiledPodRules:
    """One pod's filter chain, built once and run against every node (allocates only on failure)."""

    __slots__ = (
        "affinity",
        "candidate_names",
        "pod",
        "pre_filter",
        "pre_filter_reason",
        "resources",
        "steps",
        "volumes",
    )

    def __init__(self, pod: PodFacts, ignored_resources: Collection[str] = ()) -> None:
        self.pod = pod
        self.affinity = NodeAffinityRules(pod.node_selector, pod.affinity)
        self.resources = ResourceFit(pod.requests, ignored_resources)
        self.candidate_names = self.affinity.candidate_names
        self.pre_filter = (NODE_AFFINITY, CONFLICT_REASON) if self.affinity.conflict else None
        if self.pre_filter is None and pod.volumes is not None:
            self.pre_filter = pod.volumes.pre_filter
        self.pre_filter_reason = self.pre_filter[1] if self.pre_filter is not None else None
        steps: list[tuple[str, Step]] = []
        if not tolerated(UNSCHEDULABLE_TAINT, pod.tolerations):
            steps.append((NODE_UNSCHEDULABLE, _unschedulable))
        if pod.node_name:
            steps.append((NODE_NAME, self._node_name))
        steps.append((TAINT_TOLERATION, self._taints))
        if self.affinity.has_required:
            steps.append((NODE_AFFINITY, self._affinity))
        if pod.host_ports:
            steps.append((NODE_PORTS, self._ports))
        steps.append((NODE_RESOURCES_FIT, self._resources))
        self.steps = tuple(steps)
        self.volumes = pod.volumes if pod.volumes is not None and pod.volumes != VolumeRules() else None

    def failed_step(self, node: NodeFacts) -> tuple[str, list[str]] | None:
        """The first step the node fails and its reasons, or None when the pod may run there."""
        if self.pre_filter is not None:
            return self.pre_filter[0], [self.pre_filter[1]]
        if self.candidate_names is not None and node.name not in self.candidate_names:
            return NODE_AFFINITY, [NOT_NAMED_REASON]
        for name, step in self.steps:
            reasons = step(node)
            if reasons:
                return name, reasons
        if self.volumes is not None and exceeds_volume_limits(
            self.volumes.csi, node.csi_volumes, node.csi_volume_limits
        ):
            return NODE_VOLUME_LIMITS, [MAX_VOLUME_COUNT_REASON]
        if self.volumes is not None:  # each of the three volume filters names itself
            return volume_failure(self.volumes, node.name, node.labels)
        return None

    def first_failure(self, node: NodeFacts) -> list[str] | None:
        """kube-scheduler's reasons for refusing the node, or None when it is feasible."""
        failed = self.failed_step(node)
        return None if failed is None else failed[1]

    def preference_score(self, node: NodeFacts) -> int:
        """NodeAffinity's raw score: the weights of the preferred terms the node matches."""
        return self.affinity.preference_score(node.name, node.labels)

    def intolerable_taints(self, node: NodeFacts) -> int:
        """TaintToleration's raw score input: PreferNoSchedule taints not tolerated (fewer is better)."""
        return count_intolerable_prefer_no_schedule(node.taints, self.pod.tolerations)

    def _node_name(self, node: NodeFacts) -> list[str] | None:
        return None if node.name == self.pod.node_name else [NODE_NAME_REASON]

    def _taints(self, node: NodeFacts) -> list[str] | None:
        if not node.taints:
            return None
        taint = first_untolerated(node.taints, self.pod.tolerations)
        return None if taint is None else [untolerated_taint_reason(taint)]

    def _affinity(self, node: NodeFacts) -> list[str] | None:
        return None if self.affinity.required_matches(node.name, node.labels) else [NODE_AFFINITY_REASON]

    def _ports(self, node: NodeFacts) -> list[str] | None:
        return None if fits_ports(self.pod.host_ports, node.used_ports) else [NODE_PORTS_REASON]

    def _resources(self, node: NodeFacts) -> list[str] | None:
        if node.allocatable is None:
            return None
        return self.resources.failures(node.allocatable, node.requested, node.pod_count) or None


def _unschedulable(node: NodeFacts) -> list[str] | None:
    return [UNSCHEDULABLE_REASON] if node.unschedulable else None
