"""Does the preemptor fit on a node once some of its pods are gone? (kube's dry run on a NodeInfo copy.)

A node without some of its pods: their requests taken off the node's `requested`,
one pod fewer each, their host ports freed, every device share they hold (their
`holder` in the node's allocations) freed. The preemptor is then asked as
everywhere else: the node rules (node_rules.py) and its vendor's node answer.

Which failures removing pods can never cure (kube's UnschedulableAndUnresolvable,
for which a node is no candidate): a node that is not ready, cordoned, not the
node the pod names, with a taint the pod does not tolerate, or outside its node
affinity / selector. Ports, resources and devices can be freed.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal

import msgspec

from engine.core.model import Mode, NodeState, PodRequest, WorkloadClass
from engine.decide.claim import Claim, claim
from engine.decide.kube.filters import NODE_AFFINITY, NODE_NAME, NODE_UNSCHEDULABLE, TAINT_TOLERATION, NodeFacts
from engine.decide.kube.ports import UsedPorts
from engine.decide.kube.resources import parse_requests
from engine.decide.kube.volumes import VOLUME_BINDING, VOLUME_RESTRICTIONS, VOLUME_ZONE
from engine.decide.node_rules import NOT_READY, PodRules
from engine.decide.parts import DecisionParts
from engine.decide.preempt.model import RunningPod
from engine.node.answer import NodeFit, NodeMiss
from schemas.pod_requests import format_quantity
from schemas.quantity import parse_quantity

# kube's UnschedulableAndUnresolvable filters. VolumeRestrictions (a ReadWriteOncePod claim in use) is
# resolvable in kube by evicting its holder; the claims in use here are fixed for the decision, so it is not.
UNRESOLVABLE_STEPS = frozenset(
    {NODE_UNSCHEDULABLE, NODE_NAME, TAINT_TOLERATION, NODE_AFFINITY, VOLUME_RESTRICTIONS, VOLUME_BINDING, VOLUME_ZONE}
)
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"


class Fit(msgspec.Struct, frozen=True, kw_only=True):
    """The preemptor's place on a node without some pods: its devices, link score and the idle score it breaks."""

    devices: tuple[int, ...] = ()
    set_score: float = 0.0
    remainder_loss: float = 0.0


def without(node: NodeState, gone: Iterable[RunningPod]) -> NodeState:
    """The node as it is once `gone` have left it."""
    pods = list(gone)
    if not pods:
        return node
    requested = {k: parse_quantity(v) for k, v in node.requested.items()}
    ports = list(node.host_ports)
    holders = {p.holder for p in pods if p.holder}
    for pod in pods:
        for resource, amount in pod.requests.items():
            requested[resource] = requested.get(resource, Decimal(0)) - parse_quantity(amount)
        for port in pod.host_ports:
            if port in ports:
                ports.remove(port)
    return msgspec.structs.replace(
        node,
        requested={k: format_quantity(max(v, Decimal(0))) for k, v in sorted(requested.items())},
        pods=max(node.pods - len(pods), 0),
        host_ports=tuple(ports),
        allocations=tuple(a for a in node.allocations if a.pod_uid not in holders),
    )


class Room:
    """One preemptor's fit on nodes with some of their pods gone."""

    def __init__(
        self,
        parts: DecisionParts,
        request: PodRequest,
        mode: Mode,
        workload: tuple[WorkloadClass, ...] = (),
        *,
        cpu: bool = False,
    ) -> None:
        """`cpu`: the node policy weighs the pod's CPU (as an index reading CPU makes it). Raises RequestError
        naming a bad field of the request."""
        self.claim: Claim = claim(parts.vendors, request, mode, workload, cpu=cpu)
        self.rules = PodRules(request, parts.vendors.share_resources, parts.facts)
        self.answers = parts.node
        self._milli: dict[str, dict[str, int]] = {}  # each running pod's requests, in milli-units
        self.mode = mode
        self.request = request
        # What the fit reads of the preemptor: its request but its uid and name (as the gang's member shapes),
        # the mode, the workload classes, the CPU policy. Equal keys: equal fits on every node.
        nameless = msgspec.structs.replace(request, uid="", name="")
        self.key = msgspec.msgpack.encode((nameless, mode, workload, cpu), order="deterministic")

    @property
    def wants_devices(self) -> bool:
        return self.claim.plugin is not None and self.claim.request is not None and self.claim.request.count > 0

    def unresolvable(self, node: NodeState) -> list[str] | None:
        """The node's reasons that no eviction cures, or None when removing pods may help."""
        if not node.ready:
            return [NOT_READY]
        failed = self.rules.compiled.failed_step(self.rules.nodes.of(node))
        if failed is not None and failed[0] in UNRESOLVABLE_STEPS:
            return failed[1]
        return None

    def share_requests(self, table: dict[str, dict[str, int]]) -> None:
        """Read and keep the running pods' parsed requests in `table` (by pod key: one running sequence's)."""
        self._milli = table

    def requests_of(self, pod: RunningPod) -> dict[str, int]:
        """The pod's requests in milli-units (parsed once per preemption, or per table shared)."""
        found = self._milli.get(pod.key)
        if found is None:
            found = self._milli[pod.key] = parse_requests(pod.requests, f"{pod.key}: requests")
        return found

    def _facts_without(self, node: NodeState, pods: list[RunningPod]) -> NodeFacts:
        """The node's rule inputs once `pods` have left (milli-units, as the rules read them)."""
        facts = self.rules.nodes.of(node)
        if not pods:
            return facts
        requested = dict(facts.requested)
        for pod in pods:
            for resource, amount in self.requests_of(pod).items():
                requested[resource] = max(requested.get(resource, 0) - amount, 0)
        ports = list(node.host_ports)
        for pod in pods:
            for port in pod.host_ports:
                if port in ports:
                    ports.remove(port)
        return msgspec.structs.replace(
            facts,
            requested=requested,
            pod_count=max(facts.pod_count - len(pods), 0),
            used_ports=UsedPorts(ports) if ports else None,
        )

    def fit(self, node: NodeState, gone: Iterable[RunningPod]) -> Fit | list[str]:
        """The preemptor's fit on `node` once `gone` have left, or kube's reasons it still does not fit."""
        pods = list(gone)
        if not node.ready:
            return [NOT_READY]
        failure = self.rules.compiled.first_failure(self._facts_without(node, pods))
        if failure is not None:
            return failure
        plugin, device_request = self.claim.plugin, self.claim.request
        if plugin is None or device_request is None:
            return Fit()
        holders = {p.holder for p in pods if p.holder}
        kept = tuple(a for a in node.allocations if a.pod_uid not in holders)
        reduced = node if len(kept) == len(node.allocations) else msgspec.structs.replace(node, allocations=kept)
        result = self.answers.named(plugin, device_request, reduced, self.mode)
        if isinstance(result, NodeMiss):
            return [result.unfit.summary]
        assert isinstance(result, NodeFit)
        choice = result.choice
        return Fit(
            devices=choice.devices,
            set_score=choice.set_score,
            remainder_loss=choice.parts.get("remainder_loss", choice.parts.get("loss", 0.0)),  # NVIDIA, MetaX
        )
