"""binding_plan: on the chosen node, which static volume each unbound claim is pre-bound to, or whether it is
provisioned there, as kube's FindPodVolumes chooses (smallest claims first, each the smallest free volume the
node reaches, never one volume for two claims)."""

from __future__ import annotations

from engine.decide.kube.volumes import ClaimBinding, binding_plan, resolve_volumes
from schemas.kube import NodeSelectorRequirement, NodeSelectorTerm
from schemas.volumes import PersistentVolume, PersistentVolumeClaim, StorageClass, VolumeCatalog

ZONE = "topology.kubernetes.io/zone"
GIB = 2**30


def in_zone(zone: str) -> tuple[NodeSelectorTerm, ...]:
    return (NodeSelectorTerm(match_expressions=(NodeSelectorRequirement(key=ZONE, operator="In", values=(zone,)),)),)


def volume(name: str, zone: str, size: int) -> PersistentVolume:
    return PersistentVolume(
        name=name,
        storage_class="local",
        capacity_bytes=size * GIB,
        access_modes=("ReadWriteOnce",),
        node_terms=in_zone(zone),
    )


def claim(name: str, size: int, selected_node: str = "") -> PersistentVolumeClaim:
    return PersistentVolumeClaim(
        namespace="ns",
        name=name,
        storage_class="local",
        access_modes=("ReadWriteOnce",),
        request_bytes=size * GIB,
        selected_node=selected_node,
    )


def catalog(*claims: PersistentVolumeClaim, provisioner: str = "csi.example.com") -> VolumeCatalog:
    volumes = (volume("big-z1", "z1", 100), volume("small-z1", "z1", 10), volume("small-z2", "z2", 10))
    return VolumeCatalog(
        claims={c.key: c for c in claims},
        volumes={v.name: v for v in volumes},
        classes={"local": StorageClass(name="local", provisioner=provisioner, binding_mode="WaitForFirstConsumer")},
    )


def test_the_smallest_claim_gets_the_smallest_volume_the_node_reaches_and_the_rest_is_provisioned() -> None:
    cat = catalog(claim("logs", 5), claim("data", 50), claim("more", 50))
    rules = resolve_volumes("ns", ("data", "logs", "more"), cat)
    plan = binding_plan(rules, "n1", {ZONE: "z1"})
    assert plan == (
        ClaimBinding(claim="ns/logs", volume="small-z1"),
        ClaimBinding(claim="ns/data", volume="big-z1"),
        ClaimBinding(claim="ns/more"),
    )


def test_a_claim_that_names_its_node_already_is_provisioned_there() -> None:
    rules = resolve_volumes("ns", ("data",), catalog(claim("data", 5, selected_node="n2")))
    assert binding_plan(rules, "n2", {ZONE: "z2"}) == (ClaimBinding(claim="ns/data"),)
