"""DRA objects of a cluster given as Kubernetes objects: ResourceSlices, DeviceClasses,
ResourceClaims, ResourceClaimTemplates, DeviceTaintRules, NVIDIA's ComputeDomains (the claim
template of each one's IMEX channel), and Pods' spec.resourceClaims."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import msgspec

from engine.node.dra import DeviceClass, ResourceClaim, ResourceSlice
from engine.node.dra.model import DeviceTaintRule, ResourceClaimSpec
from schemas.dra import ContainerRequests
from topoplace.cluster_objects.files import ClusterInputError, ClusterObject, read_objects

DRA_KINDS = frozenset(
    {"ResourceSlice", "DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "DeviceTaintRule", "ComputeDomain"}
)

T = TypeVar("T", ResourceSlice, DeviceClass, ResourceClaim, DeviceTaintRule, "_Template", "_ComputeDomain")


class DraObjects(msgspec.Struct, kw_only=True):
    """The cluster's DRA objects as read (mutable while the files are read)."""

    slices: list[ResourceSlice] = []
    classes: dict[str, DeviceClass] = {}
    claims: dict[str, ResourceClaim] = {}  # by namespace/name
    templates: dict[str, ResourceClaimSpec] = {}  # each ResourceClaimTemplate's spec.spec, by namespace/name
    taint_rules: list[DeviceTaintRule] = []
    # namespace/name of a ComputeDomain's channel claim template -> namespace/name of the ComputeDomain
    compute_domains: dict[str, str] = {}

    def add(self, item: ClusterObject) -> None:
        if item.kind == "ResourceSlice":
            self.slices.append(_decoded(item, ResourceSlice))
        elif item.kind == "DeviceClass":
            device_class = _decoded(item, DeviceClass)
            self.classes[device_class.metadata.name] = device_class
        elif item.kind == "ResourceClaim":
            claim = _decoded(item, ResourceClaim)
            self.claims[f"{claim.metadata.namespace or 'default'}/{claim.metadata.name}"] = claim
        elif item.kind == "DeviceTaintRule":
            self.taint_rules.append(_decoded(item, DeviceTaintRule))
        elif item.kind == "ResourceClaimTemplate":
            template = _decoded(item, _Template)
            self.templates[f"{template.metadata.namespace}/{template.metadata.name}"] = template.spec.spec
        elif item.kind == "ComputeDomain":
            domain = _decoded(item, _ComputeDomain)
            where = f"{domain.metadata.namespace}/"
            name = domain.spec.channel.resource_claim_template.name if domain.spec.channel is not None else ""
            if name:
                self.compute_domains[where + name] = where + domain.metadata.name


class _TemplateSpec(msgspec.Struct, frozen=True, kw_only=True):
    spec: ResourceClaimSpec = ResourceClaimSpec()


class _Named(msgspec.Struct, frozen=True, kw_only=True):
    name: str = ""


class _Channel(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    resource_claim_template: _Named = _Named()


class _DomainSpec(msgspec.Struct, frozen=True, kw_only=True):
    channel: _Channel | None = None  # resource.nvidia.com ComputeDomain: spec.channel.resourceClaimTemplate.name


class _Template(msgspec.Struct, frozen=True, kw_only=True):
    metadata: _Meta = msgspec.field(default_factory=lambda: _Meta())
    spec: _TemplateSpec = _TemplateSpec()


class _ComputeDomain(msgspec.Struct, frozen=True, kw_only=True):
    metadata: _Meta = msgspec.field(default_factory=lambda: _Meta())
    spec: _DomainSpec = _DomainSpec()


def _decoded(item: ClusterObject, kind: type[T]) -> T:
    try:
        return msgspec.convert(item.body, kind)
    except msgspec.ValidationError as exc:
        raise ClusterInputError(item.where, "", f"{item.kind}: {exc}") from None


class PodClaimRef(msgspec.Struct, frozen=True, kw_only=True):
    """One of a pod's spec.resourceClaims, with the claim's name where it is known."""

    name: str  # the entry's name in the pod
    claim_name: str | None = None  # resourceClaimName, or the claim created from the template (pod status)
    template: str | None = None  # resourceClaimTemplateName
    named: str | None = None  # resourceClaimName as the pod spec gives it


class _Source(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class _Status(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    name: str
    resource_claim_name: str | None = None


class _Resources(msgspec.Struct, frozen=True, kw_only=True):
    requests: dict[str, str | int | float] = {}
    limits: dict[str, str | int | float] = {}


class _Container(msgspec.Struct, frozen=True, kw_only=True):
    name: str = ""
    resources: _Resources = _Resources()


class _Spec(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    resource_claims: tuple[_Source, ...] = ()
    init_containers: tuple[_Container, ...] = ()
    containers: tuple[_Container, ...] = ()


class _PodStatus(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    resource_claim_statuses: tuple[_Status, ...] = ()


class _Meta(msgspec.Struct, frozen=True, kw_only=True):
    name: str = ""
    namespace: str = "default"
    uid: str = ""


class _Pod(msgspec.Struct, frozen=True, kw_only=True):
    metadata: _Meta = _Meta()
    spec: _Spec = _Spec()
    status: _PodStatus = _PodStatus()


class PodClaims(msgspec.Struct, frozen=True, kw_only=True):
    namespace: str
    name: str
    uid: str = ""
    refs: tuple[PodClaimRef, ...] = ()
    containers: tuple[ContainerRequests, ...] = ()  # init containers first: extended resources (KEP-5004)


def _containers(spec: _Spec) -> tuple[ContainerRequests, ...]:
    """Each container's requests, its limits where it gives none (the API server defaults them so)."""
    return tuple(
        ContainerRequests(
            name=c.name,
            requests={k: str(v) for k, v in {**c.resources.limits, **c.resources.requests}.items()},
        )
        for c in (*spec.init_containers, *spec.containers)
    )


def pods_claims(paths: Sequence[str]) -> list[PodClaims]:
    """Every Pod's spec.resourceClaims, in file order, each resolved through the pod's status."""
    out: list[PodClaims] = []
    for path in paths:
        for item in read_objects(path):
            if item.kind != "Pod":
                continue
            try:
                pod = msgspec.convert(item.body, _Pod)
            except msgspec.ValidationError as exc:
                raise ClusterInputError(item.where, "spec.resourceClaims", str(exc)) from None
            created = {s.name: s.resource_claim_name for s in pod.status.resource_claim_statuses}
            refs = tuple(
                PodClaimRef(
                    name=s.name,
                    claim_name=s.resource_claim_name or created.get(s.name),
                    template=s.resource_claim_template_name,
                    named=s.resource_claim_name,
                )
                for s in pod.spec.resource_claims
            )
            out.append(
                PodClaims(
                    namespace=pod.metadata.namespace or "default",
                    name=pod.metadata.name,
                    uid=pod.metadata.uid,
                    refs=refs,
                    containers=_containers(pod.spec),
                )
            )
    return out


def pod_claims(paths: Sequence[str]) -> PodClaims:
    """The first Pod's spec.resourceClaims (the pod to place)."""
    found = pods_claims(paths)
    return found[0] if found else PodClaims(namespace="default", name="")
