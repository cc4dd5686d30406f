"""Whether the cluster allows a placement, decided before any write (pure).

A placement is a claim by whoever produced it; the binder checks it against
what its own API watch saw and what the nodes published:

- the pod: it exists with the placement's uid and name and names this
  scheduler (`spec.schedulerName`); a bound or terminating pod is settled by
  `outcome.judge_pod` as before;
- the node, for a pod still waiting for one: it exists, is Ready, and passes
  kube-scheduler's node filters as the placer's engine runs them
  (`engine.kube.filters`: NodeUnschedulable, TaintToleration for NoSchedule and
  NoExecute taints, NodeAffinity for nodeSelector and required node affinity),
  one implementation for both services; resources are NodeFit's (node_fit.py);
- each device: its (index, UUID) is the node's published topology's, and that
  topology gives no UUID to two indices.

Each refusal names its rule (`RefusalKind`, the metric's label) and, where
kube-scheduler has words for it, its words. CONFLICT where another placement
can succeed (the placer plans again), FAILED where retrying cannot help.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import msgspec

from engine.decide.kube.filters import (
    NODE_AFFINITY,
    NODE_UNSCHEDULABLE,
    TAINT_TOLERATION,
    CompiledPodRules,
    NodeFacts,
    PodFacts,
)
from schemas.events import BindingOutcome, PlacementEvent
from services.binder.kube_objects import NodeRules, PlacementRules
from services.binder.outcome import PodView

NOT_READY_REASON = "node(s) were not ready"  # kube-scheduler's CheckNodeCondition words


class RefusalKind(enum.Enum):
    POD_MISSING = "pod_missing"
    OTHER_SCHEDULER = "other_scheduler"
    POD_SPEC_INVALID = "pod_spec_invalid"
    NODE_MISSING = "node_missing"
    NODE_SPEC_INVALID = "node_spec_invalid"
    NODE_NOT_READY = "node_not_ready"
    NODE_UNSCHEDULABLE = "node_unschedulable"
    TAINT = "taint"
    NODE_AFFINITY = "node_affinity"
    DEVICE_IDENTITY = "device_identity"
    DEVICE_COUNT = "device_count"
    RESOURCES = "resources"
    LEDGER = "ledger"
    NOT_SEEN = "not_seen"  # the binder's watch has not listed what it must check against


_FILTER_KINDS = {
    NODE_UNSCHEDULABLE: RefusalKind.NODE_UNSCHEDULABLE,
    TAINT_TOLERATION: RefusalKind.TAINT,
    NODE_AFFINITY: RefusalKind.NODE_AFFINITY,
}


class Refusal(msgspec.Struct, frozen=True, kw_only=True):
    kind: RefusalKind
    outcome: BindingOutcome
    reason: str


def pod_refusal(
    placement: PlacementEvent, pod: PodView | None, name: tuple[str, str] | None, scheduler_name: str
) -> Refusal | None:
    """The pod is the placement's (uid and name) and ours; None when it is (bound or not)."""
    pod_name = f"{placement.namespace}/{placement.name}"
    if pod is None or pod.uid != placement.uid:
        why = f"pod {pod_name} with uid {placement.uid} does not exist"
        if pod is not None:
            why += f" (a pod with uid {pod.uid} has its name)"
        return Refusal(kind=RefusalKind.POD_MISSING, outcome=BindingOutcome.FAILED, reason=why)
    if name is not None and name != (placement.namespace, placement.name):
        why = f"pod uid {placement.uid} is {name[0]}/{name[1]}, not {pod_name}"
        return Refusal(kind=RefusalKind.POD_MISSING, outcome=BindingOutcome.FAILED, reason=why)
    if pod.scheduler_name != scheduler_name:
        why = f"pod {pod_name} names scheduler {pod.scheduler_name!r}, not {scheduler_name!r}"
        return Refusal(kind=RefusalKind.OTHER_SCHEDULER, outcome=BindingOutcome.FAILED, reason=why)
    return None


def node_refusal(placement: PlacementEvent, rules: PlacementRules | None, node: NodeRules | None) -> Refusal | None:
    """kube-scheduler's node filters for a pod waiting for a node (resources aside); None when it may go."""
    if rules is None or rules.problem is not None:
        why = f"pod {placement.namespace}/{placement.name}: {rules.problem if rules else 'its spec is not known'}"
        return Refusal(kind=RefusalKind.POD_SPEC_INVALID, outcome=BindingOutcome.FAILED, reason=why)
    if node is None:
        why = f'node "{placement.node}" not found'
        return Refusal(kind=RefusalKind.NODE_MISSING, outcome=BindingOutcome.CONFLICT, reason=why)
    if node.problem is not None:
        why = f"node {placement.node}: {node.problem}"
        return Refusal(kind=RefusalKind.NODE_SPEC_INVALID, outcome=BindingOutcome.CONFLICT, reason=why)
    if not node.ready:
        return Refusal(kind=RefusalKind.NODE_NOT_READY, outcome=BindingOutcome.CONFLICT, reason=NOT_READY_REASON)
    pod = PodFacts(node_selector=rules.node_selector, affinity=rules.affinity, tolerations=rules.tolerations)
    facts = NodeFacts(name=placement.node, labels=node.labels, taints=node.taints, unschedulable=node.unschedulable)
    failed = CompiledPodRules(pod).failed_step(facts)  # no allocatable: resources are NodeFit's
    if failed is None:
        return None
    step, reasons = failed
    kind = _FILTER_KINDS.get(step, RefusalKind.NODE_AFFINITY)
    return Refusal(kind=kind, outcome=BindingOutcome.CONFLICT, reason="; ".join(reasons))


def device_refusal(placement: PlacementEvent, uuids: Mapping[int, str] | None) -> Refusal | None:
    """Each device's (index, UUID) against the node's published topology; None when all agree."""
    if not placement.devices:
        return None
    node = placement.node

    def refused(why: str) -> Refusal:
        return Refusal(kind=RefusalKind.DEVICE_IDENTITY, outcome=BindingOutcome.CONFLICT, reason=why)

    if uuids is None:
        return refused(f"the topology of node {node} is not known, so its devices cannot be checked")
    indices_of: dict[str, list[int]] = {}
    for index, uuid in uuids.items():
        if uuid:
            indices_of.setdefault(uuid, []).append(index)
    for share in placement.devices:
        published = uuids.get(share.index)
        if published is None:
            return refused(f"node {node} has no device {share.index} in its topology")
        if share.uuid and share.uuid != published:
            return refused(f"device {share.index} on node {node} is {published}, not {share.uuid}")
        if len(same := indices_of.get(published, [])) > 1:
            listed = ", ".join(str(i) for i in sorted(same))
            return refused(f"node {node}'s topology gives one UUID {published} to devices {listed}")
    return None
