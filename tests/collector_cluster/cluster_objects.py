"""Kubernetes object bodies for the cluster watcher tests (plain JSON, as the API serves them)."""

from __future__ import annotations

from typing import Any

import msgspec

from services.collector.cluster.objects import HyperNode, Node, Pod, PodGroup, Topology


def pod_json(
    name: str,
    *,
    namespace: str = "default",
    uid: str | None = None,
    scheduler: str = "topoplace",
    node: str | None = None,
    containers: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    phase: str = "Pending",
    spec_extra: dict[str, Any] | None = None,
    **meta: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": containers
        or [{"name": "main", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
    }
    if init_containers:
        spec["initContainers"] = init_containers
    if node:
        spec["nodeName"] = node
    spec.update(spec_extra or {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"uid-{namespace}-{name}",
            "resourceVersion": "7",
            "annotations": annotations or {},
            "labels": labels or {},
            **meta,
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def pod(name: str, **kw: Any) -> Pod:
    return msgspec.convert(pod_json(name, **kw), Pod)


def container(
    name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": name, "image": "busybox", "resources": resources}


def node_json(
    name: str,
    *,
    ready: bool = True,
    unschedulable: bool = False,
    labels: dict[str, str] | None = None,
    gpus: str = "8",
    taints: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}, "resourceVersion": "3"},
        "spec": {"unschedulable": unschedulable, "taints": taints or []},
        "status": {
            "allocatable": {"nvidia.com/gpu": gpus, "cpu": "64"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True" if ready else "False"},
            ],
        },
    }


def node(name: str, **kw: Any) -> Node:
    return msgspec.convert(node_json(name, **kw), Node)


def hypernode_json(name: str, tier: int, members: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {
            "tier": tier,
            "members": [{"type": kind, "selector": {"exactMatch": {"name": member}}} for kind, member in members],
        },
    }


def hypernode(name: str, tier: int, members: list[tuple[str, str]]) -> HyperNode:
    return msgspec.convert(hypernode_json(name, tier, members), HyperNode)


def podgroup_json(
    name: str,
    *,
    namespace: str = "default",
    min_member: int = 2,
    network: dict[str, Any] | None = None,
    sub_groups: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member, "queue": "default", "minResources": {"nvidia.com/gpu": "8"}}
    if network is not None:
        spec["networkTopology"] = network
    if sub_groups is not None:
        spec["subGroupPolicy"] = sub_groups
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def podgroup(name: str, **kw: Any) -> PodGroup:
    return msgspec.convert(podgroup_json(name, **kw), PodGroup)


def topology_json(name: str, levels: list[str], version: str = "v1beta1") -> dict[str, Any]:
    return {
        "apiVersion": f"kueue.x-k8s.io/{version}",
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": level} for level in levels]},
    }


def topology(name: str, levels: list[str]) -> Topology:
    return msgspec.convert(topology_json(name, levels), Topology)
