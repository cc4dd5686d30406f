"""Gangs as Kubernetes' own gang API describes them (`scheduling.k8s.io`, KEP-4671 and KEP-5732).

Fields read, by version:

- v1alpha1 (Kubernetes 1.35): `Workload.spec.podGroups[]` {name, policy {basic | gang {minCount}}};
  a pod joins with `spec.workloadRef` {name, podGroup, podGroupReplicaKey}, and the pods of one
  (workload, podGroup, replica key) are one gang.
- v1alpha2 / v1beta1 (1.36 on): `Workload.spec.podGroupTemplates[]` and standalone `PodGroup`
  objects, each with `spec.schedulingPolicy` {basic | gang {minCount}} and
  `spec.schedulingConstraints.topology[]` {key} (KEP-5732: at most one; every pod of the group in
  one domain of that node label); a pod joins with `spec.schedulingGroup.podGroupName`. A
  PodGroup that gives no policy of its own takes its template's (`spec.podGroupTemplateRef.workload`).

v1beta1 is read with v1alpha2's field names (checked against v1alpha2's types only); a
v1alpha3 layout, if it differs, is not read.

A gang policy's `minCount` is the gang's minimum; a basic policy is no gang (minimum 1: what fits
is placed, every placed pod still inside the topology domain, as the Kubernetes docs say of TAS
with a basic policy). Pods added to a group with running members go to the running members'
domain, or wait, as the docs say of both policies. The topology key is
a hard constraint named by the node label, which is a tier's name in a tree of label levels.
`resourceClaims` of a PodGroup or its template (KEP-5729, gate DRAWorkloadResourceClaims): a pod's
claim entry equal to one of them in every field (name, resourceClaimName, resourceClaimTemplateName)
is the group's one claim, shared by every pod of the group.
Not read: the `PodGroupScheduled` condition.
"""

from __future__ import annotations

import msgspec

from schemas.errors import FieldError
from schemas.events import NetworkConstraint, TopologyMode

KUBE_SCHEDULING_GROUP = "scheduling.k8s.io"


class GangPolicySpec(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    min_count: int = 1


class BasicPolicySpec(msgspec.Struct, frozen=True, kw_only=True):
    """Empty today: its presence says standard scheduling."""


class SchedulingPolicySpec(msgspec.Struct, frozen=True, kw_only=True):
    """Exactly one of `basic` and `gang` (both absent: not given)."""

    basic: BasicPolicySpec | None = None
    gang: GangPolicySpec | None = None


class TopologyConstraintSpec(msgspec.Struct, frozen=True, kw_only=True):
    key: str = ""


class SchedulingConstraintsSpec(msgspec.Struct, frozen=True, kw_only=True):
    topology: tuple[TopologyConstraintSpec, ...] = ()


class PodGroupResourceClaim(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    """KEP-5729: a claim of the group (a claim named, or one made from a template for the group)."""

    name: str = ""
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodGroupTemplateSpec(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    """A v1alpha1 `podGroups[]` entry (its `policy`) or a v1alpha2 `podGroupTemplates[]` entry."""

    name: str = ""
    policy: SchedulingPolicySpec | None = None  # v1alpha1
    scheduling_policy: SchedulingPolicySpec | None = None  # v1alpha2 / v1beta1
    scheduling_constraints: SchedulingConstraintsSpec | None = None
    resource_claims: tuple[PodGroupResourceClaim, ...] = ()  # KEP-5729


class WorkloadSpec(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    pod_groups: tuple[PodGroupTemplateSpec, ...] = ()  # v1alpha1
    pod_group_templates: tuple[PodGroupTemplateSpec, ...] = ()  # v1alpha2 / v1beta1


class KubeMeta(msgspec.Struct, frozen=True, kw_only=True):
    name: str = ""
    namespace: str = "default"


class Workload(msgspec.Struct, frozen=True, kw_only=True):
    """A `scheduling.k8s.io` Workload as `kubectl get workloads -o json` prints it (the fields read)."""

    metadata: KubeMeta = KubeMeta()
    spec: WorkloadSpec = WorkloadSpec()

    def template(self, name: str) -> PodGroupTemplateSpec | None:
        return next((t for t in (*self.spec.pod_group_templates, *self.spec.pod_groups) if t.name == name), None)


class WorkloadTemplateRef(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    workload_name: str = ""
    pod_group_template_name: str = ""


class TemplateRef(msgspec.Struct, frozen=True, kw_only=True):
    workload: WorkloadTemplateRef | None = None


class KubePodGroupSpec(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    pod_group_template_ref: TemplateRef | None = None
    scheduling_policy: SchedulingPolicySpec | None = None
    scheduling_constraints: SchedulingConstraintsSpec | None = None
    resource_claims: tuple[PodGroupResourceClaim, ...] = ()  # KEP-5729: claims shared by the group's pods


class KubePodGroup(msgspec.Struct, frozen=True, kw_only=True):
    """A `scheduling.k8s.io` PodGroup (v1alpha2 / v1beta1) with the fields read; a v1alpha1 Workload's
    pod group is read into this form too (engine: `gang.workload_group`)."""

    metadata: KubeMeta = KubeMeta()
    spec: KubePodGroupSpec = KubePodGroupSpec()


def resolved(group: KubePodGroup, workload: Workload | None) -> KubePodGroup:
    """The PodGroup with what it leaves out taken from its Workload's template (as the controller copies it)."""
    ref = group.spec.pod_group_template_ref
    if workload is None or ref is None or ref.workload is None:
        return group
    template = workload.template(ref.workload.pod_group_template_name)
    if template is None:
        field = "spec.podGroupTemplateRef.workload.podGroupTemplateName"
        reason = f"Workload {workload.metadata.name!r} has no template {ref.workload.pod_group_template_name!r}"
        raise FieldError(field, reason)
    spec = group.spec
    return msgspec.structs.replace(
        group,
        spec=msgspec.structs.replace(
            spec,
            scheduling_policy=spec.scheduling_policy or template.scheduling_policy or template.policy,
            scheduling_constraints=spec.scheduling_constraints or template.scheduling_constraints,
            resource_claims=spec.resource_claims or template.resource_claims,
        ),
    )


def from_template(workload: Workload, template: PodGroupTemplateSpec, replica_key: str = "") -> KubePodGroup:
    """A v1alpha1 Workload's pod group (one replica of it) in PodGroup form."""
    suffix = f"-{replica_key}" if replica_key else ""
    name = f"{workload.metadata.name}-{template.name}{suffix}"
    return KubePodGroup(
        metadata=KubeMeta(name=name, namespace=workload.metadata.namespace),
        spec=KubePodGroupSpec(
            scheduling_policy=template.scheduling_policy or template.policy,
            scheduling_constraints=template.scheduling_constraints,
            resource_claims=template.resource_claims,
        ),
    )


def kube_policy(group: KubePodGroup) -> tuple[int, NetworkConstraint | None]:
    """(minimum, hard topology constraint or None) of a PodGroup; FieldError names a bad field."""
    policy = group.spec.scheduling_policy
    field = "spec.schedulingPolicy"
    if policy is None or (policy.basic is None) == (policy.gang is None):
        raise FieldError(field, "exactly one of basic and gang must be set")
    minimum = 1
    if policy.gang is not None:
        if policy.gang.min_count < 1:
            raise FieldError(f"{field}.gang.minCount", f"must be at least 1, got {policy.gang.min_count}")
        minimum = policy.gang.min_count
    constraints = group.spec.scheduling_constraints
    topology = constraints.topology if constraints is not None else ()
    if len(topology) > 1:
        raise FieldError("spec.schedulingConstraints.topology", f"at most one constraint, got {len(topology)}")
    if not topology:
        return minimum, None
    if not topology[0].key:
        raise FieldError("spec.schedulingConstraints.topology[0].key", "must name a node label")
    return minimum, NetworkConstraint(mode=TopologyMode.HARD, highest_tier_name=topology[0].key)
