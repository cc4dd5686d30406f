"""A gang as a user writes it (a Volcano PodGroup and its pods, or pods with Kueue's annotations), for the engine."""

from __future__ import annotations

from engine.core.model import GangInput
from engine.decide.gang.request import GangRequest
from schemas.errors import FieldError
from schemas.gangs import kueue_group, kueue_policy, volcano_policy


def gang_request(given: GangInput) -> GangRequest:
    """The engine's GangRequest; FieldError names what cannot be read."""
    if not given.pods:
        raise FieldError("gang.pods", "a gang needs at least one pod")
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
    )
