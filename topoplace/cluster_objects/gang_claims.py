"""A gang's members' ResourceClaims from a cluster given as Kubernetes objects, for the gang search.

Each member's spec.resourceClaims, in order: a named claim (or the one its status says was created from
its template) as the cluster has it; a template's claim not created yet as the ResourceClaim controller
would create it (`<pod>-<entry>`, the template's spec), so that the gang is answered before its claims
exist. A claim several members name is one claim (allocated once), and so is a claim of a
`scheduling.k8s.io` PodGroup (KEP-5729): a pod's entry equal to one of the group's
`resourceClaims` in every field is the group's claim, made once from its template for the group
(`<group>-<entry>`) when the pod's status names none. Members whose template is a
ComputeDomain's channel template keep the gang inside one NVLink clique. A claim that cannot be read
gives kube-scheduler's reason instead (the gang waits).
"""

from __future__ import annotations

from collections.abc import Sequence

from engine import PodRequest
from engine.decide.gang import GangClaims
from engine.node.dra import AllocationInput, Features, ResourceClaim, allocated_devices, consumed_capacity
from engine.node.dra.model import ObjectMeta
from engine.node.dra.taint_rules import with_taint_rules
from schemas.gangs_kube import KubePodGroup
from topoplace.cluster_objects.dra import DraObjects, PodClaimRef, pods_claims


def _of_group(ref: PodClaimRef, group: KubePodGroup | None) -> bool:
    """Whether the pod's entry is one of the group's claims (KEP-5729: equal in every field)."""
    fields = (ref.name, ref.named, ref.template)
    return group is not None and any(
        (c.name, c.resource_claim_name, c.resource_claim_template_name) == fields for c in group.spec.resource_claims
    )


def _claim_of(
    namespace: str, pod: str, ref: PodClaimRef, dra: DraObjects, group: KubePodGroup | None
) -> ResourceClaim | str:
    if ref.claim_name is not None:
        claim = dra.claims.get(f"{namespace}/{ref.claim_name}")
        if claim is None:
            return f'resourceclaim.resource.k8s.io "{ref.claim_name}" not found'
        if claim.metadata.deletion_timestamp is not None:
            return f"resourceclaim {namespace}/{ref.claim_name} is being deleted"
        return claim
    if ref.template is None:
        return f'pod "{namespace}/{pod}", spec.resourceClaim "{ref.name}": none of the supported fields are set'
    spec = dra.templates.get(f"{namespace}/{ref.template}")
    if spec is None:
        return f'resourceclaimtemplate.resource.k8s.io "{ref.template}" not found'
    owner = group.metadata.name if group is not None and _of_group(ref, group) else pod  # one for the group
    name = f"{owner}-{ref.name}"
    return ResourceClaim(metadata=ObjectMeta(name=name, namespace=namespace, uid=f"{namespace}/{name}"), spec=spec)


def gang_claims(
    pods: Sequence[PodRequest],
    pod_paths: Sequence[str],
    dra: DraObjects,
    features: Features,
    group: KubePodGroup | None = None,
) -> GangClaims | str | None:
    """The members' claims (None: no member names one), or the reason the gang waits for them."""
    refs = {(p.namespace, p.name): p for p in pods_claims(pod_paths)}
    members: dict[str, tuple[ResourceClaim, ...]] = {}
    domain = ""
    for pod in pods:
        given = refs.get((pod.namespace, pod.name))
        if given is None or not given.refs:
            continue
        claims: list[ResourceClaim] = []
        for ref in given.refs:
            found = _claim_of(pod.namespace, pod.name, ref, dra, group)
            if isinstance(found, str):
                return found
            claims.append(found)
            if ref.template is not None and not domain:
                domain = dra.compute_domains.get(f"{pod.namespace}/{ref.template}", "")
        members[pod.uid] = tuple(claims)
    if not members:
        return None
    everything = list(dra.claims.values())
    given_input = AllocationInput(
        slices=with_taint_rules(dra.slices, dra.taint_rules),
        classes=dra.classes,
        allocated=allocated_devices(everything),
        consumed=consumed_capacity(everything),
        features=features,
    )
    return GangClaims(members=members, given=given_input, compute_domain=domain)
