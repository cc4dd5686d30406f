"""Kubernetes object bodies for the cluster watcher tests (plain JSON, as the API serves them)."""

from __future__ import annotations

from typing import Any

import msgspec

from services.collector.watch_objects import HyperNode, Node, Pod


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
    name: str, *, ready: bool = True, unschedulable: bool = False, labels: dict[str, str] | None = None, gpus: str = "8"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}, "resourceVersion": "3"},
        "spec": {"unschedulable": unschedulable},
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
