"""`engine place --cluster`: a pod asking an extended resource that a DeviceClass serves (KEP-5004).

A pod asking `nvidia.com/gpu: 2` the old way is first placed as the engine places any pod: on a
node whose device plugin publishes the resource (allocatable), where topoplace knows its GPUs.
Only when no node can take it that way, and a DeviceClass serves the resource (its
`extendedResourceName`, or `deviceclass.resource.kubernetes.io/<class>`), it is placed again among
the nodes that publish none of those resources: the engine decides its other requests there, and
the claim kube-scheduler would create for it (engine/node/dra/extended.py) is allocated on the
chosen node, or the next that fits, with the pod's own claims. The answer's `claims` then holds
that claim, `name` null until the API server names it from `generateName`, with the
`requestMappings` that the pod's `status.extendedResourceClaimStatus` gets. (kube-scheduler weighs
both kinds of node together; a node serving a resource by device plugin and another by DRA
alone is not considered here.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine import Decision, Mode, PodRequest, Snapshot
    from engine.node.dra.extended import ExtendedClaim
    from topoplace.cluster_objects.cluster import ClusterRead


def place_extended(
    first: Decision,
    snapshot: Snapshot,
    pod: PodRequest,
    cluster: ClusterRead,
    pod_paths: list[str],
    gates: dict[str, bool],
    mode: Mode,
) -> tuple[Decision, list[dict[str, Any]]] | None:
    """The pod placed with its extended resources backed by DRA; None when that does not apply (no class
    serves what it asks, no node serves it through DRA alone, the gate is off): `first` stands."""
    import msgspec

    from engine import place
    from engine.node.dra import CelPrograms
    from engine.node.dra.extended import class_mapping, dra_backed, extended_claim
    from services.placer.dra_allocation import only_on
    from topoplace.cluster_objects.dra import pod_claims
    from topoplace.cluster_objects.dra_claims import decided_with, place_claims
    from topoplace.feature_gates import FeatureGates

    features = FeatureGates(gates=gates).dra_features()
    mapping = class_mapping(cluster.dra.classes.values())
    wanted = dra_backed(pod.requests, {}, mapping)
    if not features.DRAExtendedResource or not wanted:
        return None
    nodes = [n.name for n in snapshot.nodes if dra_backed(pod.requests, n.allocatable, mapping) == wanted]
    info = pod_claims(pod_paths)
    made = extended_claim(info.namespace, info.name, info.uid, info.containers, wanted, mapping)
    if not nodes or made is None:
        return None
    others = {k: v for k, v in pod.requests.items() if k not in wanted}
    decision = place(snapshot, only_on(msgspec.structs.replace(pod, requests=others), nodes), mode, explain=True)
    outcome = place_claims(decision, info, cluster.dra, snapshot.nodes, CelPrograms(), features, extra=(made.claim,))
    placed, claims = decided_with(decision, outcome)
    return _with_first(placed, first, frozenset(nodes)), [_named(c, made) for c in claims]


def _named(answer: dict[str, Any], made: ExtendedClaim) -> dict[str, Any]:
    """The extended-resource claim as the answer shows it: not named yet, its generateName and mappings."""
    import msgspec

    if answer["name"] != made.claim.metadata.name:
        return answer
    return {
        **answer,
        "name": None,
        "generateName": made.generate_name,
        "annotations": dict(made.claim.metadata.annotations),
        "requestMappings": msgspec.to_builtins(made.request_mappings),
    }


def _with_first(placed: Decision, first: Decision, dra_nodes: frozenset[str]) -> Decision:
    """The nodes DRA could serve as this placement saw them, the others as the first one did (there the
    node's device plugin serves the resources); without a node, kube's message over all of them."""
    import msgspec

    from engine.decide.kube.messages import fit_error_message

    verdicts = [v for v in placed.alternatives if v.node in dra_nodes]
    verdicts += [v for v in first.alternatives if v.node not in dra_nodes and v.node != placed.node]
    merged = msgspec.structs.replace(placed, alternatives=tuple(verdicts))
    if placed.node is not None:
        return merged
    total = len(verdicts)
    reasons = [r for v in verdicts if not v.fits for r in v.reasons]
    return msgspec.structs.replace(merged, reason=fit_error_message(total, reasons))
