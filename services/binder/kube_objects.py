"""The few fields of Pods and Nodes the binder reads, decoded straight from the API's JSON.

Decoding the raw bytes into these Structs skips kubernetes-asyncio's models,
which cost most of the client's CPU per object. Unknown fields are ignored.

The scheduling fields a placement is checked against (a pod's schedulerName,
nodeSelector, affinity and tolerations; a node's labels, taints,
unschedulable and Ready condition) are read here too. Affinity, tolerations
and taints stay raw until they are needed and are then decoded into the
`schemas.kube` Structs the engine's node rules take: a malformed one makes
that pod or node refuse placements with a reason, never drops the object from
the binder's view (and with it the devices its pod holds). The envelope of the
replies (lists, watch events, Status) is topoplace.kube_codec's, read by
topoplace.informer.
"""

from __future__ import annotations

import sys
from typing import TypeVar

import msgspec

from schemas.kube import Affinity, Taint, Toleration
from schemas.pod_requests import InitContainerRequest, effective_pod_request
from schemas.seal import DecisionKey, SealCheck
from services.binder.node_fit import milli_requests
from services.binder.outcome import PodView
from topoplace.kube_codec import status_message as status_message  # apply.py reads it here
from topoplace.kube_storage import PodVolume, pod_claim_names


class ObjectMeta(msgspec.Struct, kw_only=True, rename="camel"):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    deletion_timestamp: str | None = None
    annotations: dict[str, str] | None = None
    labels: dict[str, str] | None = None


Quantities = dict[str, str | int | float]  # as the API writes them; a hand-written object may carry numbers


DEFAULT_SCHEDULER = "default-scheduler"
ABSENT = msgspec.Raw(b"null")  # a raw field the object does not have (msgspec takes no `Raw | None`)


class PlacementRules(msgspec.Struct, frozen=True, kw_only=True):
    """What a pod asks of its node (kube-scheduler's node filters read these), decoded.

    `problem` names the field that could not be decoded: such a pod is not bound anywhere."""

    node_selector: dict[str, str] = {}
    affinity: Affinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    volume_claims: tuple[str, ...] = ()  # its PersistentVolumeClaims by name (VolumeBinding's PreBind)
    problem: str | None = None


class NodeRules(msgspec.Struct, frozen=True, kw_only=True):
    """What of a Node decides which pods may go there, decoded (`problem`: a field that was not)."""

    labels: dict[str, str] = {}
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True  # False only when the Ready condition says so (kube-scheduler's old CheckNodeCondition)
    problem: str | None = None


_affinity_decoder = msgspec.json.Decoder(Affinity | None)
_tolerations_decoder = msgspec.json.Decoder(tuple[Toleration, ...] | None)
_taints_decoder = msgspec.json.Decoder(tuple[Taint, ...] | None)
T = TypeVar("T")


def _decoded(
    decoder: msgspec.json.Decoder[T | None], raw: msgspec.Raw | None, field: str
) -> tuple[T | None, str | None]:
    """The field decoded (None when absent or null), or why it is not decodable (names the field)."""
    if raw is None:
        return None, None
    try:
        return decoder.decode(raw), None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return None, f"{field}: {exc}"


class ResourceRequirements(msgspec.Struct, kw_only=True):
    requests: Quantities | None = None


class Container(msgspec.Struct, kw_only=True, rename="camel"):
    resources: ResourceRequirements | None = None
    restart_policy: str | None = None  # an init container with Always is a sidecar


class PodSpec(msgspec.Struct, kw_only=True, rename="camel"):
    node_name: str | None = None
    scheduler_name: str = DEFAULT_SCHEDULER  # the API server defaults it so
    containers: list[Container] = []
    init_containers: list[Container] = []
    overhead: Quantities | None = None
    node_selector: dict[str, str] | None = None
    affinity: msgspec.Raw = ABSENT
    tolerations: msgspec.Raw = ABSENT
    volumes: list[PodVolume] = []
    priority: int | None = None  # written by the API server's Priority admission
    termination_grace_period_seconds: int | None = None

    def requests(self) -> dict[str, int]:
        """The pod's effective request per resource, in milli-units (schemas.pod_requests)."""
        return effective_pod_request(
            [_milli(c) for c in self.containers],
            [
                InitContainerRequest(requests=_milli(c), restartable=c.restart_policy == "Always")
                for c in self.init_containers
            ],
            milli_requests(self.overhead or {}),
        )


def _milli(container: Container) -> dict[str, int]:
    return milli_requests((container.resources.requests if container.resources else None) or {})


class PodStatus(msgspec.Struct, kw_only=True, rename="camel"):
    phase: str = ""
    nominated_node_name: str = ""


class PodObject(msgspec.Struct, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)

    def view(self, key: DecisionKey | None = None) -> PodView:
        """The binder's small struct of the pod: of its annotations only the devices its seal proves
        (`key`: the seal's; None: no device annotation counts)."""
        meta = self.metadata
        node = self.spec.node_name or ""
        sealed = SealCheck()
        if node and key is not None:
            sealed = key.check(meta.uid, node, meta.annotations or {})
        return PodView(
            uid=meta.uid,
            node_name=node,
            resource_version=meta.resource_version,
            terminating=meta.deletion_timestamp is not None,
            devices=sealed.devices,
            seal_problem=sealed.problem,
            phase=self.status.phase,
            requests=self.spec.requests(),
            scheduler_name=sys.intern(self.spec.scheduler_name),  # one copy per name, not per pod
            priority=self.spec.priority or 0,
            nominated_node=self.status.nominated_node_name,
            grace_seconds=self.spec.termination_grace_period_seconds,
        )

    def placement_rules(self) -> PlacementRules:
        spec = self.spec
        affinity, affinity_problem = _decoded(_affinity_decoder, spec.affinity, "spec.affinity")
        tolerations, tolerations_problem = _decoded(_tolerations_decoder, spec.tolerations, "spec.tolerations")
        return PlacementRules(
            node_selector=dict(spec.node_selector or {}),
            affinity=affinity,
            tolerations=tolerations or (),
            volume_claims=pod_claim_names(self.metadata.name, spec.volumes),
            problem=affinity_problem or tolerations_problem,
        )


class NodeCondition(msgspec.Struct, kw_only=True):
    type: str = ""
    status: str = ""


class NodeSpec(msgspec.Struct, kw_only=True):
    unschedulable: bool = False
    taints: msgspec.Raw = ABSENT


class NodeStatus(msgspec.Struct, kw_only=True):
    # Quantities are strings from the API; a hand-written object may carry numbers.
    allocatable: dict[str, str | int | float] = {}
    conditions: list[NodeCondition] = []


class NodeObject(msgspec.Struct, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)

    def rules(self) -> NodeRules:
        taints, problem = _decoded(_taints_decoder, self.spec.taints, "spec.taints")
        # A node whose kubelet has not reported yet has no Ready condition: kube-scheduler took it as ready.
        ready = all(c.status == "True" for c in self.status.conditions if c.type == "Ready")
        return NodeRules(
            labels=dict(self.metadata.labels or {}),
            taints=taints or (),
            unschedulable=self.spec.unschedulable,
            ready=ready,
            problem=problem,
        )
