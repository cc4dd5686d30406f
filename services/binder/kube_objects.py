"""The few fields of Pods and Nodes the binder reads, decoded straight from the API's JSON.

Decoding the raw bytes into these Structs skips kubernetes-asyncio's models,
which cost most of the client's CPU per object. Unknown fields are ignored.
"""

from __future__ import annotations

import msgspec

from schemas.pod_requests import InitContainerRequest, effective_pod_request
from schemas.seal import DecisionKey, SealCheck
from services.binder.node_fit import milli_requests
from services.binder.outcome import PodView


class ObjectMeta(msgspec.Struct, kw_only=True, rename="camel"):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    deletion_timestamp: str | None = None
    annotations: dict[str, str] | None = None


Quantities = dict[str, str | int | float]  # as the API writes them; a hand-written object may carry numbers


class ResourceRequirements(msgspec.Struct, kw_only=True):
    requests: Quantities | None = None


class Container(msgspec.Struct, kw_only=True, rename="camel"):
    resources: ResourceRequirements | None = None
    restart_policy: str | None = None  # an init container with Always is a sidecar


class PodSpec(msgspec.Struct, kw_only=True, rename="camel"):
    node_name: str | None = None
    containers: list[Container] = []
    init_containers: list[Container] = []
    overhead: Quantities | None = None

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


class PodStatus(msgspec.Struct, kw_only=True):
    phase: str = ""


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
        )


class NodeStatus(msgspec.Struct, kw_only=True):
    # Quantities are strings from the API; a hand-written object may carry numbers.
    allocatable: dict[str, str | int | float] = {}


class NodeObject(msgspec.Struct, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)


class ListMeta(msgspec.Struct, kw_only=True, rename="camel"):
    resource_version: str = ""


class ObjectList(msgspec.Struct, kw_only=True):
    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    items: list[msgspec.Raw] = []


class WatchEvent(msgspec.Struct, kw_only=True):
    type: str
    object: msgspec.Raw


class ApiStatus(msgspec.Struct, kw_only=True):
    """A Kubernetes Status object (error replies, and ERROR events in a watch)."""

    code: int = 0
    reason: str = ""
    message: str = ""


def status_message(body: bytes, status: int) -> str:
    """The server's Status message when it sent one, else the bare HTTP status."""
    try:
        decoded = msgspec.json.decode(body, type=ApiStatus)
    except (msgspec.DecodeError, msgspec.ValidationError):
        decoded = None
    if decoded is not None and decoded.message:
        return f"HTTP {status}: {decoded.message}"
    return f"HTTP {status}"
