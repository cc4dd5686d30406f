"""What InterPodAffinity and PodTopologySpread read of the objects: pods' labels, pod (anti-)affinity and
spread constraints, the namespaces' labels, and the selectors of the workloads a pod belongs to.

The cluster-default spread constraints (hostname maxSkew 3, zone maxSkew 5, ScheduleAnyway) count the
pods kube-scheduler's DefaultSelector gives (engine.decide.kube.default_selector, the rule the cluster
watcher applies too) from the Services, ReplicationControllers, ReplicaSets and StatefulSets given in
the files. Without those objects a pod gets no default constraints (as kube-scheduler with an empty
selector).
"""

from __future__ import annotations

from typing import Any

import msgspec

from engine.core.model import Namespace, PlacedPod
from engine.decide.kube.default_selector import WorkloadSelectors as DefaultSelectors
from schemas.kube import LabelSelector, PodAffinities, TopologySpreadConstraint
from services.collector.cluster import objects as obj
from topoplace.cluster_objects.files import ClusterInputError, ClusterObject

WORKLOAD_KINDS = ("Namespace", "Service", "ReplicationController", "ReplicaSet", "StatefulSet")


class _Spec(msgspec.Struct, kw_only=True, rename="camel"):
    affinity: dict[str, Any] | None = None
    topology_spread_constraints: list[dict[str, Any]] = []


class _Pod(msgspec.Struct, kw_only=True):
    spec: _Spec = msgspec.field(default_factory=_Spec)


def _convert(item: ClusterObject, raw: object, kind: Any, field: str) -> Any:
    try:
        return msgspec.convert(raw, kind)
    except msgspec.ValidationError as exc:
        raise ClusterInputError(item.where, field, str(exc)) from None


def pod_topology(item: ClusterObject) -> tuple[PodAffinities | None, tuple[TopologySpreadConstraint, ...]]:
    """The pod's podAffinity / podAntiAffinity (None: neither) and topologySpreadConstraints."""
    spec = _convert(item, item.body, _Pod, "spec").spec
    affinities = None
    if spec.affinity is not None:
        affinities = _convert(item, spec.affinity, PodAffinities, "spec.affinity")
        affinities = None if affinities.empty else affinities
    constraints = tuple(
        _convert(item, c, TopologySpreadConstraint, f"spec.topologySpreadConstraints[{i}]")
        for i, c in enumerate(spec.topology_spread_constraints)
    )
    return affinities, constraints


def placed_pod(item: ClusterObject, pod: obj.Pod) -> PlacedPod:
    """A running pod as the two plugins read it."""
    meta = pod.metadata
    namespace = meta.namespace or "default"
    affinities, _ = pod_topology(item)
    return PlacedPod(
        uid=meta.uid or f"{namespace}/{meta.name}",
        namespace=namespace,
        labels=dict(meta.labels),
        affinities=affinities,
        terminating=meta.deletion_timestamp is not None,
    )


class _Meta(msgspec.Struct, kw_only=True):
    name: str = ""
    namespace: str = ""
    labels: dict[str, str] = {}


class _MapSpec(msgspec.Struct, kw_only=True):
    selector: dict[str, str] | None = None


class _SelectorSpec(msgspec.Struct, kw_only=True):
    selector: LabelSelector | None = None


class WorkloadSelectors:
    """Namespaces' labels, and the Services' and controllers' selectors (engine.decide.kube.default_selector)."""

    def __init__(self) -> None:
        self.namespaces: dict[str, dict[str, str]] = {}
        self.selectors = DefaultSelectors()

    def add(self, item: ClusterObject) -> None:
        meta = _convert(item, item.body.get("metadata", {}), _Meta, "metadata")
        namespace = meta.namespace or "default"
        spec_body = item.body.get("spec", {})
        if item.kind == "Namespace":
            self.namespaces[meta.name] = dict(meta.labels)
        elif item.kind == "Service":
            self.selectors.set_service(namespace, meta.name, _convert(item, spec_body, _MapSpec, "spec").selector)
        elif item.kind == "ReplicationController":
            selector = _convert(item, spec_body, _MapSpec, "spec").selector
            labelled = LabelSelector(match_labels=selector) if selector else None
            self.selectors.set_controller(item.kind, namespace, meta.name, labelled)
        else:
            labelled = _convert(item, spec_body, _SelectorSpec, "spec").selector
            self.selectors.set_controller(item.kind, namespace, meta.name, labelled)

    def namespace_list(self) -> tuple[Namespace, ...]:
        return tuple(Namespace(name=n, labels=labels) for n, labels in sorted(self.namespaces.items()))

    def default_selector(self, pod: obj.Pod) -> LabelSelector | None:
        """kube-scheduler's DefaultSelector for the pod (None: empty, so no default constraints)."""
        owner = next((o for o in pod.metadata.owner_references if o.controller), None)
        controller = (owner.kind, owner.name) if owner is not None else None
        return self.selectors.default_selector(pod.metadata.namespace or "default", pod.metadata.labels, controller)
