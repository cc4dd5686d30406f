"""A gang's members' DRA claims in the placer: allocated by the engine jointly with the gang's choice and
carried in each member's decision (services/placer/gang_claims.py); a claim they share allocated once;
a claim not created yet is kube-scheduler's reason; claims read without their spec still refuse the gang."""

from __future__ import annotations

import msgspec
from placer_builders import status, topology
from test_placer_dra_allocator import GPU_DRIVER, claim, claimed, device, exactly, slice_event, view_with

from engine import Engine
from schemas.dra import PodClaim
from schemas.dra_objects import AllocationResult
from schemas.events import AllocatedClaimEvent, PendingGangEvent, PendingPodEvent, PlacementOutcome
from services.placer.decide import decide
from services.placer.decide_gang import decide_gang
from services.placer.view import ClusterView


def gpu_nodes(*names: str) -> ClusterView:
    return view_with(*(slice_event(n, GPU_DRIVER, [device(i, n) for i in range(4)]) for n in names), nodes=names)


def gang(*members: PendingPodEvent) -> PendingGangEvent:
    return PendingGangEvent(name="default/job", namespace="default", min_member=len(members), members=members)


def test_found_each_member_gets_its_own_claims_on_its_node_and_the_view_holds_them() -> None:
    view = gpu_nodes("n1", "n2")
    members = (
        claimed("p1", claim([exactly("gpus", 4)], uid="c1")),
        claimed("p2", claim([exactly("gpus", 4)], uid="c2")),
    )
    placement = decide_gang(view, gang(*members), engine=Engine()).placement
    assert placement is not None and placement.outcome is PlacementOutcome.PLACED, placement
    assert sorted(m.node for m in placement.members) == ["n1", "n2"]  # four GPUs each: a node each
    for member in placement.members:
        (allocation,) = member.claims
        assert allocation.uid in ("c1", "c2") and allocation.allocation is not None
        assert {r.pool for r in allocation.results} == {member.node} and len(allocation.results) == 4
        assert sorted(d.uuid for d in member.devices) == [f"GPU-{member.node}-{i}" for i in range(4)]
    # assumed before publishing: no GPU is left for another pod
    after = decide(view, claimed("p3", claim([exactly("gpus")], uid="c3")), engine=Engine()).placement
    assert after is not None and after.outcome is PlacementOutcome.UNSCHEDULABLE


def test_none_a_gang_whose_claims_no_nodes_devices_hold_is_unschedulable() -> None:
    view = gpu_nodes("n1", "n2")
    members = tuple(claimed(f"p{i}", claim([exactly("gpus", 4)], uid=f"c{i}")) for i in range(3))
    placement = decide_gang(view, gang(*members), engine=Engine()).placement
    assert placement is not None and placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert "(at most 2 fit in one)" in placement.reason  # a node's four GPUs hold one member's claim
    assert not any(view.holdings_of(m.uid) for m in members)


def test_found_a_claim_two_members_name_is_allocated_once_on_their_node() -> None:
    view = gpu_nodes("n1", "n2")
    one = claim([exactly("gpus", 1)], uid="shared")
    placement = decide_gang(view, gang(claimed("p1", one), claimed("p2", one)), engine=Engine()).placement
    assert placement is not None and placement.outcome is PlacementOutcome.PLACED, placement
    nodes = {m.node for m in placement.members}
    assert len(nodes) == 1  # node-local devices: both members where the claim's device is
    assert len({msgspec.json.encode(m.claims) for m in placement.members}) == 1


def test_a_shared_claims_gpu_is_one_members_device_only() -> None:
    # the binder's device ledger gives a device to one pod: a GPU in two members' devices is refused
    view = gpu_nodes("n1")
    one = claim([exactly("gpus", 1)], uid="shared")
    members = tuple(claimed(f"p{i}", claim([exactly("gpus", 1)], uid=f"c{i}"), one) for i in (1, 2))
    placement = decide_gang(view, gang(*members), engine=Engine()).placement
    assert placement is not None and placement.outcome is PlacementOutcome.PLACED, placement
    uuids = [d.uuid for m in placement.members for d in m.devices]
    assert len(uuids) == 3 and len(set(uuids)) == 3  # each member's own GPU, and the shared one once


def test_a_claim_allocated_already_adds_no_device_to_the_member_naming_it() -> None:
    allocation = {"devices": {"results": [{"request": "gpus", "driver": GPU_DRIVER, "pool": "n1", "device": "gpu-0"}]}}
    held = AllocatedClaimEvent(
        uid="shared",
        namespace="default",
        name="c-shared",
        node="n1",
        allocation=msgspec.convert(allocation, AllocationResult),
    )
    view = gpu_nodes("n1")
    view.apply(held)  # a gang-mate bound with it: its GPU is that pod's device
    placement = decide_gang(
        view, gang(claimed("p2", claim([exactly("gpus", 1)], uid="shared"))), engine=Engine()
    ).placement
    assert placement is not None and placement.outcome is PlacementOutcome.PLACED, placement
    (member,) = placement.members
    assert [r.device for c in member.claims for r in c.results] == ["gpu-0"] and member.devices == ()


def test_a_claim_not_created_yet_is_kube_schedulers_reason() -> None:
    view = gpu_nodes("n1")
    waiting = PodClaim(
        pod_claim_name="gpu", claim_name="", waiting='pod "default/pod-p1": ResourceClaim not created yet'
    )
    placement = decide_gang(view, gang(claimed("p1", waiting)), engine=Engine()).placement
    assert placement is not None and placement.outcome is PlacementOutcome.UNSCHEDULABLE
    assert placement.reason == 'pod "default/pod-p1": ResourceClaim not created yet'


def test_a_bare_node_is_never_given_to_a_member_with_claims() -> None:
    view = gpu_nodes("n1")
    view.apply(topology("bare", 4))
    view.apply(status("bare"))
    placement = decide_gang(view, gang(claimed("p1", claim([exactly("gpus", 4)], uid="c1"))), engine=Engine()).placement
    assert placement is not None and placement.outcome is PlacementOutcome.PLACED, placement
    assert [m.node for m in placement.members] == ["n1"]  # "bare" has no ResourceSlice


# --- ComputeDomains: the cluster watcher names the domain of a claim made from its channel template ---


def clique_nodes(**cliques: str) -> ClusterView:
    """Nodes with four GPUs each, labelled with their NVLink clique."""
    view = gpu_nodes(*cliques)
    for node, clique in cliques.items():
        view.apply(status(node, labels={"nvidia.com/gpu.clique": clique}))
    return view


def channel_member(uid: str, domain: str) -> PendingPodEvent:
    own = claim([exactly("gpus", 4)], uid=f"c-{uid}")
    return claimed(uid, msgspec.structs.replace(own, template="imex-channel", compute_domain=domain))


def test_found_a_compute_domains_gang_inside_one_clique() -> None:
    view = clique_nodes(n1="a.1", n2="b.1", n3="b.1")
    members = (channel_member("p1", "default/imex"), channel_member("p2", "default/imex"))
    placement = decide_gang(view, gang(*members), engine=Engine()).placement
    assert placement is not None and placement.outcome is PlacementOutcome.PLACED, placement
    assert sorted(m.node for m in placement.members) == ["n2", "n3"]  # clique b.1: the only one with two nodes
    assert all(m.claims and m.claims[0].allocation is not None for m in placement.members)


def test_none_no_clique_holds_the_compute_domains_gang_and_the_reason_says_so() -> None:
    view = clique_nodes(n1="a.1", n2="b.1")
    members = (channel_member("p1", "default/imex"), channel_member("p2", "default/imex"))
    placement = decide_gang(view, gang(*members), engine=Engine()).placement
    assert placement is not None and placement.outcome is PlacementOutcome.UNSCHEDULABLE, placement
    assert "ComputeDomain default/imex keeps its pods in one NVLink clique (nvidia.com/gpu.clique)" in placement.reason
    # without a domain the same gang spans the two cliques
    free = (channel_member("p1", ""), channel_member("p2", ""))
    spread = decide_gang(clique_nodes(n1="a.1", n2="b.1"), gang(*free), engine=Engine()).placement
    assert spread is not None and spread.outcome is PlacementOutcome.PLACED, spread
