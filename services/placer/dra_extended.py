"""A pending pod's extended resources served by DRA (KEP-5004, gate DRAExtendedResource); pure.

A pod asking `nvidia.com/gpu: 2` the old way is first decided as any pod: on a node whose device
plugin publishes the resource (the node agent knows its GPUs). When no node can take it that way
and a DeviceClass serves the resource (`extendedResourceName`, or
`deviceclass.resource.kubernetes.io/<class>`), it is decided again among the nodes whose
allocatable holds none of those resources: the engine decides its other requests, and the claim
kube-scheduler would create for it (engine/node/dra/extended.py) is allocated with the pod's own
claims (dra_allocation.py). The placement carries that claim with `extended` set: the binder
creates it (owned by the pod), allocates and reserves it, and writes the pod's
`status.extendedResourceClaimStatus` before it binds. When that fails too, the reason says both.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from engine import Decision, PodRequest
from engine.node.dra import CelPrograms, Features
from engine.node.dra.extended import class_mapping, dra_backed, extended_claim
from schemas.dra import ClaimAllocation
from schemas.events import PendingPodEvent
from services.placer.dra_allocation import DEFAULT_FEATURES, place_allocated, read_whole
from services.placer.view import ClusterView

Claims = tuple[ClaimAllocation, ...]


def place_extended(
    first: tuple[Decision, Claims],
    request: PodRequest,
    pending: PendingPodEvent,
    view: ClusterView,
    place: Callable[[PodRequest], Decision],
    programs: CelPrograms,
    features: Features = DEFAULT_FEATURES,
) -> tuple[Decision, Claims]:
    """`first` (the pod decided as any pod, unplaced), or the pod placed with its extended resources
    backed by DRA; unplaced either way, the reason says why each way failed."""
    decision, _ = first
    if not features.DRAExtendedResource or not pending.containers:
        return first
    if pending.claims and not read_whole(pending.claims):
        return first  # claims of an older watcher take the older path, which knows no extended resources
    cluster = view.dra_cluster()
    mapping = class_mapping(cluster.classes.values())
    wanted = dra_backed(request.requests, {}, mapping)
    if not wanted:
        return first
    nodes = [n for n in view.index().nodes() if dra_backed(request.requests, n.allocatable, mapping) == wanted]
    made = extended_claim(pending.namespace, pending.name, pending.uid, pending.containers, wanted, mapping)
    if not nodes or made is None:
        return first
    others = msgspec.structs.replace(request, requests={k: v for k, v in request.requests.items() if k not in wanted})
    placed, claims = place_allocated(others, pending.claims, cluster, nodes, place, programs, features, extra=made)
    if placed.node is not None:
        return placed, claims
    why = f"{decision.reason}; through DRA on {len(nodes)} node(s) publishing no {', '.join(wanted)}: {placed.reason}"
    return msgspec.structs.replace(decision, reason=why), ()
