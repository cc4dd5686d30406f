"""A gang's members' ResourceClaims, allocated jointly with the gang's choice (engine.decide.gang.claims).

Tables from the documented semantics: a member's claims are allocated on the node the gang gives it
(status.allocation as kube-scheduler writes it), and a node whose devices cannot hold them is not given
to it; a claim several members name is allocated once and each of them lands where its devices are
reachable (node-local: that node; allNodes / nodeSelector slices: wherever they allow); a ComputeDomain's
pods stay inside one NVLink clique (dra-driver-nvidia-gpu #804). Found, none, error."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from dra_builders import claim, device, device_class, exact, slice_
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import NodeState, PodRequest, RequestError, new_index, place_gang
from engine.cluster.network import CLIQUE_LABEL, build_tree
from engine.decide.gang import GangClaims, GangDecision, GangRequest, MemberPlacement
from engine.decide.gang.claims import ClaimRules, Refinement
from engine.node.dra import AllocationInput, CelPrograms, DeviceClass, ResourceClaim, ResourceSlice
from engine.node.vendors import registry
from schemas.events import NetworkConstraint, TopologyMode

RACK = "example.com/rack"
HARD_RACK = NetworkConstraint(mode=TopologyMode.HARD, highest_tier_name=RACK)
CHANNEL_DRIVER = "compute-domain.nvidia.com"
CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"


def node(name: str, pods: int = 8, labels: dict[str, str] | None = None) -> NodeState:
    return NodeState(name=name, labels=labels or {}, allocatable={"pods": str(pods)})


def gpus(node_name: str, count: int) -> ResourceSlice:
    return slice_([device(f"gpu-{i}") for i in range(count)], node=node_name, pool=node_name, name=f"{node_name}-gpus")


def member(i: int) -> PodRequest:
    return PodRequest(uid=f"uid-{i}", name=f"worker-{i}", namespace="default")


def own_claims(count: int, gpus_each: int, prefix: str = "worker") -> dict[str, tuple[ResourceClaim, ...]]:
    """One claim per member, as the ResourceClaim controller creates them from one template."""
    return {f"uid-{i}": (claim([exact("gpu", gpus_each)], name=f"{prefix}-{i}-gpu"),) for i in range(count)}


def decide(
    nodes: list[NodeState],
    slices: list[ResourceSlice],
    members: dict[str, tuple[ResourceClaim, ...]],
    *,
    network: NetworkConstraint | None = None,
    levels: tuple[str, ...] = (),
    classes: list[DeviceClass] | None = None,
    compute_domain: str = "",
) -> GangDecision:
    index = new_index()
    for n in nodes:
        index.upsert(n)
    tree = build_tree([], {n.name: n.labels for n in nodes}, topology_levels=levels).tree
    pods = tuple(member(i) for i in range(len(members)))
    gang = GangRequest(name="default/job", min_member=len(pods), network=network, pods=pods)
    cluster = AllocationInput(
        slices=tuple(slices),
        classes={c.metadata.name: c for c in (classes if classes is not None else [device_class()])},
    )
    claims = GangClaims(members=members, given=cluster, compute_domain=compute_domain)
    return place_gang(registry, index, tree, gang, claims=claims)


def devices_of(decision: GangDecision) -> dict[str, list[tuple[str, str]]]:
    """Per member: (pool, device) of every claim's allocation."""
    return {p.name: [(r.pool, r.device) for c in p.claims for r in c.allocation.devices.results] for p in decision.pods}


# --- each member's own claims, on the node the gang gives it ----------------------------------------------


def two_racks(c_gpus: int) -> tuple[list[NodeState], list[ResourceSlice]]:
    """Rack r1: two nodes of 2 GPUs (the tightest rack); rack r2: one node of `c_gpus`."""
    nodes = [node("node-a", labels={RACK: "r1"}), node("node-b", labels={RACK: "r1"})]
    nodes.append(node("node-c", labels={RACK: "r2"}))
    return nodes, [gpus("node-a", 2), gpus("node-b", 2), gpus("node-c", c_gpus)]


def test_found_members_go_where_their_claims_fit_and_each_gets_its_own_devices() -> None:
    nodes, slices = two_racks(8)
    decision = decide(nodes, slices, own_claims(2, 4), network=HARD_RACK, levels=(RACK,))
    assert decision.placed, decision.reason
    assert [p.node for p in decision.pods] == ["node-c", "node-c"]  # r1's nodes hold 2 GPUs, not 4
    got = devices_of(decision)
    assert len(got["worker-0"]) == len(got["worker-1"]) == 4
    assert not set(got["worker-0"]) & set(got["worker-1"])  # never one device twice
    first = decision.pods[0].claims[0]
    assert (first.namespace, first.name) == ("default", "worker-0-gpu")
    selector = msgspec.to_builtins(first.allocation)["nodeSelector"]  # as kube-scheduler writes it
    assert selector["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ("node-c",)


def test_none_a_node_holds_only_as_many_members_as_its_devices_do() -> None:
    nodes, slices = two_racks(6)  # one member of 4 GPUs on node-c, and no rack holds two
    decision = decide(nodes, slices, own_claims(2, 4), network=HARD_RACK, levels=(RACK,))
    assert not decision.placed
    assert all(p.node is None and not p.claims for p in decision.pods)
    assert "cannot allocate all claims" in decision.reason


def test_error_a_claim_naming_no_device_class_is_a_request_error() -> None:
    nodes, slices = two_racks(8)
    with pytest.raises(RequestError) as caught:
        decide(nodes, slices, own_claims(2, 4), network=HARD_RACK, levels=(RACK,), classes=[])
    assert caught.value.field == "claims"


def test_members_without_claims_share_the_gang_with_members_that_have_them() -> None:
    nodes, slices = two_racks(4)
    members = {"uid-0": (claim([exact("gpu", 4)], name="worker-0-gpu"),), "uid-1": ()}
    decision = decide(nodes, slices, members, levels=(RACK,))
    assert decision.placed, decision.reason
    by_name = {p.name: p for p in decision.pods}
    assert by_name["worker-0"].node == "node-c"
    assert not by_name["worker-1"].claims


# --- a claim several members name: allocated once, reachable from each --------------------------------------


def shared(name: str = "shared-gpu") -> ResourceClaim:
    return claim([exact("gpu", 1)], name=name)


SHARED_TABLE = [
    # (case, pods per node, members' nodes, placed)
    ("found: node-local devices, both members on that node", 2, ["node-a", "node-a"], True),
    ("none: node-local devices and a node takes one member", 1, [None, None], False),
]


@pytest.mark.parametrize(("case", "pods", "where", "placed"), SHARED_TABLE, ids=[c[0] for c in SHARED_TABLE])
def test_a_shared_node_local_claim_keeps_its_members_on_its_node(
    case: str, pods: int, where: list[str | None], placed: bool
) -> None:
    nodes = [node("node-a", pods), node("node-b", pods)]
    slices = [gpus("node-a", 1), gpus("node-b", 1)]
    one = shared()
    decision = decide(nodes, slices, {"uid-0": (one,), "uid-1": (one,)})
    assert decision.placed is placed, case
    assert [p.node for p in decision.pods] == where
    if placed:
        allocations = {msgspec.json.encode(c.allocation) for p in decision.pods for c in p.claims}
        assert len(allocations) == 1  # allocated once, the same answer for each member
    else:
        assert "cannot allocate all claims" in decision.reason


def fabric(**spec: Any) -> ResourceSlice:
    """A network-attached device: one slice for many nodes (allNodes or a nodeSelector)."""
    return slice_([device("fabric-0")], driver="fabric.example.com", pool="fabric", node=None, **spec)


def test_found_a_shared_all_nodes_claim_lets_its_members_spread() -> None:
    nodes = [node("node-a", 1), node("node-b", 1)]
    fabric_class = device_class("fabric", ('device.driver == "fabric.example.com"',))
    one = claim([exact("mem", 1, "fabric")], name="shared-fabric")
    decision = decide(nodes, [fabric(allNodes=True)], {"uid-0": (one,), "uid-1": (one,)}, classes=[fabric_class])
    assert decision.placed, decision.reason
    assert sorted(p.node or "" for p in decision.pods) == ["node-a", "node-b"]
    assert devices_of(decision) == {"worker-0": [("fabric", "fabric-0")], "worker-1": [("fabric", "fabric-0")]}
    assert decision.pods[0].claims[0].allocation.node_selector is None  # reachable from every node


def test_a_shared_claim_already_allocated_holds_its_members_to_its_node_selector() -> None:
    nodes, slices = two_racks(8)
    in_r2 = {"key": RACK, "operator": "In", "values": ["r2"]}
    allocation = {
        "devices": {
            "results": [{"request": "mem", "driver": "fabric.example.com", "pool": "fabric", "device": "fabric-0"}]
        },
        "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [in_r2]}]},
    }
    body = {"metadata": {"name": "shared-fabric", "namespace": "default"}, "status": {"allocation": allocation}}
    one = msgspec.convert(body, ResourceClaim)
    decision = decide(nodes, slices, {"uid-0": (one,), "uid-1": (one,)}, levels=(RACK,))
    assert decision.placed, decision.reason
    assert [p.node for p in decision.pods] == ["node-c", "node-c"]  # r1 is tighter, but out of reach
    assert decision.pods[1].claims[0].allocation == one.status.allocation  # kept, not allocated again


def test_none_a_shared_claim_out_of_every_nodes_reach() -> None:
    nodes = [node("node-a"), node("node-b")]
    allocation = {
        "devices": {"results": []},
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-z"]}]}]
        },
    }
    body = {"metadata": {"name": "elsewhere", "namespace": "default"}, "status": {"allocation": allocation}}
    one = msgspec.convert(body, ResourceClaim)
    decision = decide(nodes, [], {"uid-0": (one,), "uid-1": (one,)})
    assert not decision.placed
    assert "cannot allocate all claims" in decision.reason


# --- a ComputeDomain's pods inside one NVLink clique --------------------------------------------------------


def channels(node_name: str) -> ResourceSlice:
    return slice_([device("channel-0")], driver=CHANNEL_DRIVER, pool=node_name, node=node_name, name=f"{node_name}-cd")


def clique_cluster(second_clique: int) -> tuple[list[NodeState], list[ResourceSlice]]:
    """Clique c1: two nodes; clique c2: `second_clique` nodes; two nodes in no clique. One pod a node."""
    nodes = [
        node("node-a1", 1, labels={CLIQUE_LABEL: "c1"}),
        node("node-a2", 1, labels={CLIQUE_LABEL: "c1"}),
    ]
    nodes += [node(f"node-b{i}", 1, labels={CLIQUE_LABEL: "c2"}) for i in range(second_clique)]
    nodes += [node("node-x1", 1), node("node-x2", 1)]
    return nodes, [channels(n.name) for n in nodes]


def channel_claims(count: int) -> dict[str, tuple[ResourceClaim, ...]]:
    return {f"uid-{i}": (claim([exact("channel", 1, "channel")], name=f"worker-{i}-channel"),) for i in range(count)}


CHANNEL_CLASSES = [device_class("channel", (f'device.driver == "{CHANNEL_DRIVER}"',))]

CLIQUE_TABLE = [
    # (case, nodes in clique c2, compute domain, placed, nodes' prefix)
    ("found: the one clique that holds three", 3, "default/imex", True, "node-b"),
    ("none: no clique holds three", 2, "default/imex", False, ""),
    ("no ComputeDomain: the gang spreads past the cliques", 2, "", True, ""),
]


@pytest.mark.parametrize(("case", "size", "domain", "placed", "prefix"), CLIQUE_TABLE, ids=[c[0] for c in CLIQUE_TABLE])
def test_a_compute_domain_keeps_its_gang_in_one_nvlink_clique(
    case: str, size: int, domain: str, placed: bool, prefix: str
) -> None:
    assert CLIQUE_LABEL == "nvidia.com/gpu.clique"
    nodes, slices = clique_cluster(size)
    decision = decide(nodes, slices, channel_claims(3), classes=CHANNEL_CLASSES, compute_domain=domain)
    assert decision.placed is placed, case
    if placed and prefix:
        assert all((p.node or "").startswith(prefix) for p in decision.pods)
        assert decision.hypernode == "nvlink:c2"
        assert all(c.allocation.devices.results[0].device == "channel-0" for p in decision.pods for c in p.claims)
    if not placed:
        assert "ComputeDomain default/imex keeps its pods in one NVLink clique" in decision.reason
        assert "(the roomiest, nvlink:c1, takes 2)" in decision.reason, decision.reason


def test_none_a_compute_domain_without_cliques_waits_naming_them() -> None:
    nodes = [node("node-x1", 1), node("node-x2", 1)]
    decision = decide(
        nodes,
        [channels("node-x1"), channels("node-x2")],
        channel_claims(2),
        classes=CHANNEL_CLASSES,
        compute_domain="default/imex",
    )
    assert not decision.placed
    assert decision.reason == (
        "gang default/job: ComputeDomain default/imex keeps its pods in one NVLink clique;"
        " no node has nvidia.com/gpu.clique"
    )


# --- the rounds: what the next search changes ---------------------------------------------------------------


def rules_for(members: dict[str, tuple[ResourceClaim, ...]], slices: list[ResourceSlice]) -> ClaimRules:
    cluster = AllocationInput(slices=tuple(slices), classes={"gpu": device_class()})
    return ClaimRules(GangClaims(members=members, given=cluster), CelPrograms())


def on_nodes(*where: str) -> GangDecision:
    pods = tuple(MemberPlacement(name=f"worker-{i}", uid=f"uid-{i}", node=n) for i, n in enumerate(where))
    return GangDecision(gang="default/job", placed=True, pods=pods)


def test_a_node_that_cannot_hold_the_next_member_has_its_slots_cut_to_what_it_held() -> None:
    rules = rules_for(own_claims(2, 1), [gpus("node-a", 1)])
    nodes = {"node-a": node("node-a")}
    change = rules.allocate_members(on_nodes("node-a", "node-a"), nodes)
    assert isinstance(change, Refinement) and change.cap is not None
    assert change.cap[1:] == ("node-a", 1)
    assert rules.refined(change).slots("uid-1", nodes["node-a"], 2) == 1


def test_a_shared_claim_out_of_a_members_reach_is_fixed_where_its_first_member_got_it() -> None:
    one = shared()
    rules = rules_for({"uid-0": (one,), "uid-1": (one,)}, [gpus("node-a", 1), gpus("node-b", 1)])
    nodes = {"node-a": node("node-a"), "node-b": node("node-b")}
    assert rules.slots("uid-1", nodes["node-b"], 1) == 1  # before: either node could hold it
    change = rules.allocate_members(on_nodes("node-a", "node-b"), nodes)
    assert isinstance(change, Refinement) and change.fixed is not None
    key, allocation = change.fixed
    assert key == "default/shared-gpu" and allocation.devices.results[0].pool == "node-a"
    fixed = rules.refined(change)
    assert fixed.slots("uid-1", nodes["node-b"], 1) == 0  # out of reach now
    assert fixed.slots("uid-1", nodes["node-a"], 2) == 2


# --- generated clusters: never one device twice, on the member's node, placed exactly when room exists -------


@settings(max_examples=60, deadline=None)
@given(
    devices=st.lists(st.integers(0, 4), min_size=1, max_size=4),
    per_node=st.integers(1, 3),
    size=st.integers(1, 4),
    each=st.integers(1, 3),
)
def test_generated_gangs_get_distinct_devices_on_their_own_nodes(
    devices: list[int], per_node: int, size: int, each: int
) -> None:
    nodes = [node(f"node-{i}", per_node) for i in range(len(devices))]
    slices = [gpus(f"node-{i}", n) for i, n in enumerate(devices) if n]
    decision = decide(nodes, slices, own_claims(size, each))
    room = sum(min(per_node, n // each) for n in devices)
    assert decision.placed is (room >= size)
    if not decision.placed:
        return
    seen: set[tuple[str, str]] = set()
    for pod in decision.pods:
        got = [(r.pool, r.device) for c in pod.claims for r in c.allocation.devices.results]
        assert len(got) == each and {p for p, _ in got} == {pod.node}  # node-local: on its own node
        assert not seen & set(got)
        seen |= set(got)


@settings(max_examples=60, deadline=None)
@given(cliques=st.lists(st.integers(1, 4), min_size=1, max_size=3), loose=st.integers(0, 3), size=st.integers(1, 4))
def test_generated_compute_domain_gangs_stay_in_one_clique_and_wait_only_when_none_holds_them(
    cliques: list[int], loose: int, size: int
) -> None:
    nodes = [node(f"c{c}-{i}", 1, labels={CLIQUE_LABEL: f"c{c}"}) for c, n in enumerate(cliques) for i in range(n)]
    nodes += [node(f"x-{i}", 1) for i in range(loose)]
    slices = [channels(n.name) for n in nodes]
    decision = decide(nodes, slices, channel_claims(size), classes=CHANNEL_CLASSES, compute_domain="default/imex")
    assert decision.placed is (max(cliques) >= size)
    if decision.placed:
        assert len({(p.node or "").split("-")[0] for p in decision.pods}) == 1
        assert all(not (p.node or "").startswith("x-") for p in decision.pods)


@settings(max_examples=40, deadline=None)
@given(devices=st.lists(st.integers(0, 2), min_size=1, max_size=4), per_node=st.integers(1, 3), size=st.integers(2, 3))
def test_generated_members_sharing_a_node_local_claim_share_its_node(
    devices: list[int], per_node: int, size: int
) -> None:
    nodes = [node(f"node-{i}", per_node) for i in range(len(devices))]
    slices = [gpus(f"node-{i}", n) for i, n in enumerate(devices) if n]
    one = shared()
    decision = decide(nodes, slices, {f"uid-{i}": (one,) for i in range(size)})
    assert decision.placed is (per_node >= size and any(devices))
    if decision.placed:
        assert len({p.node for p in decision.pods}) == 1
        assert len({msgspec.json.encode(c.allocation) for p in decision.pods for c in p.claims}) == 1
