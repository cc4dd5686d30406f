"""A gang as a user writes it, for the engine: a Volcano PodGroup and its pods, a `scheduling.k8s.io`
PodGroup (Kubernetes' Workload API), a KAI PodGroup, or pods with Kueue's annotations; each becomes
the one GangRequest the gang search reads."""

from __future__ import annotations

from engine.core.model import GangInput
from engine.decide.gang.request import GangRequest
from schemas.errors import FieldError
from schemas.gangs import KUEUE_BALANCED_PLACEMENT, kueue_group, kueue_policy, volcano_policy
from schemas.gangs_kai import kai_policy
from schemas.gangs_kube import kube_policy


def gang_request(given: GangInput) -> GangRequest:
    """The engine's GangRequest; FieldError names what cannot be read."""
    if not given.pods:
        raise FieldError("gang.pods", "a gang needs at least one pod")
    if sum(g is not None for g in (given.podgroup, given.workload_group, given.kai_podgroup)) > 1:
        raise FieldError("gang", "give one of podgroup, workload_group and kai_podgroup")
    if given.podgroup is not None:
        group = given.podgroup
        network, sub_groups = volcano_policy(group)
        name = f"{group.metadata.namespace}/{group.metadata.name}"
        return GangRequest(
            name=name,
            min_member=group.spec.min_member,
            network=network,
            sub_groups=sub_groups,
            pods=given.pods,
            minimum_placement=given.minimum_placement,
        )
    if given.workload_group is not None:
        kube = given.workload_group
        minimum, network = kube_policy(kube)
        name = f"{kube.metadata.namespace}/{kube.metadata.name}"
        return GangRequest(
            name=name, min_member=minimum, network=network, pods=given.pods, minimum_placement=given.minimum_placement
        )
    if given.kai_podgroup is not None:
        kai = given.kai_podgroup
        network, sub_groups = kai_policy(kai, given.pods[0].annotations)
        return GangRequest(
            name=f"{kai.metadata.namespace}/{kai.metadata.name}",
            min_member=kai.spec.min_member,
            network=network,
            sub_groups=sub_groups,
            pods=given.pods,
            minimum_placement=given.minimum_placement,
        )
    first = given.pods[0]
    found = kueue_group(first.annotations)
    if found is None:
        raise FieldError("gang.podgroup", "is required unless the pods carry Kueue's pod-group annotations")
    network, sub_groups = kueue_policy(first.annotations)
    name = f"{first.namespace}/{found[0]}"
    return GangRequest(
        name=name,
        min_member=found[1],
        network=network,
        sub_groups=sub_groups,
        pods=given.pods,
        minimum_placement=given.minimum_placement,
        balanced=given.kueue_feature_gates.get(KUEUE_BALANCED_PLACEMENT, False),
    )
