"""The parts of Kubernetes objects the cluster watcher reads, decoded once at the edge.

Unknown fields are ignored; a field of the wrong type fails the decode with
msgspec's error, which names the field.
"""

from __future__ import annotations

from typing import Any

import msgspec

Quantity = str | int | float  # the API writes strings; hand-made objects sometimes carry numbers


class OwnerReference(msgspec.Struct, kw_only=True, rename="camel"):
    kind: str = ""
    name: str = ""
    controller: bool = False


class ObjectMeta(msgspec.Struct, kw_only=True, rename="camel"):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    owner_references: list[OwnerReference] = []


class ResourceRequirements(msgspec.Struct, kw_only=True):
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}


class Container(msgspec.Struct, kw_only=True):
    name: str = ""
    resources: ResourceRequirements = msgspec.field(default_factory=ResourceRequirements)


class PodSpec(msgspec.Struct, kw_only=True, rename="camel"):
    scheduler_name: str = "default-scheduler"
    node_name: str | None = None
    priority: int | None = None
    containers: list[Container] = []
    init_containers: list[Container] = []


class PodStatus(msgspec.Struct, kw_only=True):
    phase: str = ""


class Pod(msgspec.Struct, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)


class NodeCondition(msgspec.Struct, kw_only=True):
    type: str = ""
    status: str = ""


class NodeSpec(msgspec.Struct, kw_only=True):
    unschedulable: bool = False


class NodeStatus(msgspec.Struct, kw_only=True):
    allocatable: dict[str, Quantity] = {}
    capacity: dict[str, Quantity] = {}
    conditions: list[NodeCondition] = []


class Node(msgspec.Struct, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)


class ExactMatch(msgspec.Struct, kw_only=True):
    name: str = ""


class RegexMatch(msgspec.Struct, kw_only=True):
    pattern: str = ""


class MemberSelector(msgspec.Struct, kw_only=True, rename="camel"):
    exact_match: ExactMatch | None = None
    regex_match: RegexMatch | None = None
    label_match: dict[str, Any] | None = None


class HyperNodeMemberSpec(msgspec.Struct, kw_only=True):
    type: str = ""
    selector: MemberSelector = msgspec.field(default_factory=MemberSelector)


class HyperNodeSpec(msgspec.Struct, kw_only=True):
    tier: int
    members: list[HyperNodeMemberSpec] = []


class HyperNode(msgspec.Struct, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: HyperNodeSpec


class ListMeta(msgspec.Struct, kw_only=True, rename="camel"):
    resource_version: str = ""


class ObjectList(msgspec.Struct, kw_only=True):
    """A list reply, its items still raw: each item is decoded alone so one bad object costs only itself."""

    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    items: list[msgspec.Raw] = []
