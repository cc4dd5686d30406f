"""The engine's memo tables change speed, never a decision; and they stay bounded."""

from __future__ import annotations

import random
from collections.abc import Iterator

import msgspec
import pytest
from engine_builders import both, fixture_node, gpu, node, pod, snapshot
from random_clusters import metax_pod, random_cluster, random_pod

from engine import (
    Allocation,
    Decision,
    Engine,
    Limits,
    Mode,
    NodeState,
    PodRequest,
    RequestError,
    Snapshot,
    WorkloadClass,
    choose_devices,
)
from engine.core import node_key as key_fields
from engine.core.memo import BoundedCache, IdentityCache, Interner, Memo
from engine.core.node_key import NodeKeys
from engine.node import answer as answer_module
from engine.node.answer import NodeAnswers
from engine.node.vendors.nvidia import search as nvidia_search
from services.collector.node.topology_files import load_topology

BOTH_MODES = pytest.mark.parametrize("mode", [Mode.DEFAULT, Mode.HAMI])


class Engines:
    """This test's engines, cold for every test: one with its memo tables, one computing afresh."""

    cached = Engine()
    uncached = Engine(limits=Limits(caches=False))


@pytest.fixture(autouse=True)
def cold_engine() -> Iterator[None]:
    Engines.cached = Engine()
    Engines.uncached = Engine(limits=Limits(caches=False))
    yield


def place(snap: Snapshot, request: PodRequest, mode: Mode = Mode.DEFAULT, *, by: Engine | None = None) -> Decision:
    """The decision with every other node explained, by the test's cached engine (or `by`)."""
    return (by or Engines.cached).place(snap, request, mode, explain=True)


def encoded(snap: Snapshot, request: PodRequest, mode: Mode, *, by: Engine | None = None) -> bytes:
    try:
        return msgspec.json.encode(place(snap, request, mode, by=by))
    except RequestError as exc:
        return f"RequestError {exc}".encode()


def uncached(snap: Snapshot, request: PodRequest, mode: Mode) -> bytes:
    return encoded(snap, request, mode, by=Engines.uncached)


# --- equivalence -----------------------------------------------------------------------------


@BOTH_MODES
@pytest.mark.parametrize("seed", range(6))
def test_cached_decisions_are_byte_identical_to_uncached_ones(seed: int, mode: Mode) -> None:
    rng = random.Random(seed)
    snap = random_cluster(rng, 30)
    pods = [random_pod(rng, f"pod-{j}") for j in range(10)]
    expected = [uncached(snap, p, mode) for p in pods]
    cold = [encoded(snap, p, mode) for p in pods]  # fills the tables, shares answers between twins
    warm = [encoded(snap, p, mode) for p in pods]  # every node answered from the tables
    assert cold == expected
    assert warm == expected
    assert sum(b.startswith(b'{"node":"') for b in expected) >= 2, "the sample should place some pods"


@BOTH_MODES
@pytest.mark.parametrize("seed", range(4))
def test_shared_metax_cards_answer_the_same_from_the_tables(seed: int, mode: Mode) -> None:
    # QoS and application classes of the holders decide who may share a card: near twins differ there
    rng = random.Random(seed)
    snap = random_cluster(rng, 30, machines=("metax-8gpu-2zone",))
    for j in range(12):
        request = metax_pod(rng, f"pod-{j}")
        expected = uncached(snap, request, mode)
        assert encoded(snap, request, mode) == expected
        assert encoded(snap, request, mode) == expected


MIX_A = (WorkloadClass(gpus=1, milli=1000, weight=0.5), WorkloadClass(gpus=1, milli=500, weight=0.5))
MIX_B = (WorkloadClass(gpus=2, milli=1000, weight=0.7), WorkloadClass(gpus=1, milli=250, weight=0.3))


def fragmentation_pod(request: PodRequest) -> PodRequest:
    annotations = dict(request.annotations)
    annotations["hami.io/node-scheduler-policy"] = "fragmentation"
    return msgspec.structs.replace(request, annotations=annotations)


@pytest.mark.parametrize("seed", range(4))
def test_fragmentation_decisions_are_byte_identical_to_uncached_ones(seed: int) -> None:
    rng = random.Random(seed)
    cluster = random_cluster(rng, 30, machines=("dgx-h100", "dgx1-v100", "pcie-8gpu-2socket", "pcie-4gpu"))
    pods = [fragmentation_pod(random_pod(rng, f"pod-{j}")) for j in range(10)]
    for mix in (MIX_A, MIX_B, ()):  # the tables warmed by one mix must not answer for another
        snap = msgspec.structs.replace(cluster, workload=mix)
        expected = [uncached(snap, p, Mode.DEFAULT) for p in pods]
        assert [encoded(snap, p, Mode.DEFAULT) for p in pods] == expected
        assert [encoded(snap, p, Mode.DEFAULT) for p in pods] == expected
        assert sum(b.startswith(b'{"node":"') for b in expected) >= 2, "the sample should place some pods"


def test_the_workload_mix_is_part_of_the_answer_key() -> None:
    # a: GPU 2 taken, 0-1 idle; b: GPUs 0-1 taken, GPU 2 idle; a whole 1-GPU pod.
    # mix A (1 whole GPU, half GPU): no free share becomes fragment on either node: delta 0 both, a by name.
    # mix B (2 whole GPUs 0.7, quarter 0.3): a loses its pair (+700), b's lone idle GPU was all
    # fragment for the 2-GPU class and goes (-700): b. Answers kept from mix A would still say a.
    gpus = [gpu(0), gpu(1), gpu(2)]
    nodes = (node("a", gpus, busy=(2,)), node("b", gpus, busy=(0, 1)))
    request = pod(1, node_policy="fragmentation")
    assert place(Snapshot(nodes=nodes, workload=MIX_A), request).node == "a"
    decision = place(Snapshot(nodes=nodes, workload=MIX_B), request)
    assert decision.node == "b"
    assert decision.score_parts["frag_delta"] == pytest.approx(-700.0)
    assert encoded(Snapshot(nodes=nodes, workload=MIX_B), request, Mode.DEFAULT) == uncached(
        Snapshot(nodes=nodes, workload=MIX_B), request, Mode.DEFAULT
    )


@pytest.mark.parametrize("resource", ["nvidia.com/gpu", "metax-tech.com/gpu", "aws.amazon.com/neuron"])
def test_every_vendor_answers_the_same_from_the_tables(resource: str) -> None:
    rng = random.Random(resource)
    snap = random_cluster(rng, 40)
    for mode in (Mode.DEFAULT, Mode.HAMI):
        for count in (1, 2, 4):
            request = PodRequest(uid=f"p-{count}", requests={resource: str(count)})
            expected = uncached(snap, request, mode)
            assert encoded(snap, request, mode) == expected
            assert encoded(snap, request, mode) == expected


def test_a_changed_snapshot_is_answered_for_its_new_state() -> None:
    idle = [fixture_node(f"dgx-{i}", "dgx-h100") for i in range(3)]
    request = pod(4)
    first = place(snapshot(*idle), request)
    busier = msgspec.structs.replace(idle[0], allocations=tuple(Allocation(pod_uid=f"x{i}", index=i) for i in range(6)))
    changed = snapshot(busier, *idle[1:])
    assert encoded(changed, request, Mode.DEFAULT) == uncached(changed, request, Mode.DEFAULT)
    assert first.node == "dgx-0"  # three equal idle nodes: the first name wins
    assert place(changed, request).node == "dgx-1"
    verdict = next(v for v in place(changed, request).alternatives if v.node == "dgx-0")
    assert not verdict.fits and verdict.reason.startswith("2 of 8 GPUs free, 4 requested")


def test_identical_nodes_are_searched_once_and_keep_their_own_names(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    evaluate = NodeAnswers.evaluate

    def counting(*args: object) -> object:
        calls.append("x")
        return evaluate(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(NodeAnswers, "evaluate", counting)
    # an asymmetric pair gives every node a warning, which must carry that node's name
    links = (*both(0, 1, nvlinks=2), *both(2, 3, nvlinks=1)[:1], *both(3, 2, nvlinks=4)[:1])
    twins = [node(f"twin-{i}", [gpu(i) for i in range(4)], links, busy=[0]) for i in range(5)]
    decision = place(snapshot(*twins), pod(2))
    assert len(calls) == 1
    assert decision.warnings == tuple(f"twin-{i}: asymmetric link 2<->3" for i in range(5))
    assert {v.node for v in decision.alternatives} == {f"twin-{i}" for i in range(1, 5)}
    assert all("twin-0" in v.reason for v in decision.alternatives)  # ties go to the first name
    place(snapshot(*twins), pod(2))
    assert len(calls) == 1  # the second decision is answered from the table
    expected = msgspec.json.encode(place(snapshot(*twins), pod(2), by=Engines.uncached))
    assert len(calls) == 2  # without the tables twins still share one answer within a decision
    assert msgspec.json.encode(decision) == expected


@pytest.mark.parametrize(
    "holder",
    [
        Allocation(pod_uid="h", index=0, memory_mib=8192, cores=30, qos="burst-share"),
        Allocation(pod_uid="h", index=0, memory_mib=8192, cores=30, qos="fixed-share", app_class="online"),
        Allocation(pod_uid="h", index=0, memory_mib=60000, cores=30, qos="fixed-share"),
        Allocation(pod_uid="h", index=0, memory_mib=8192, cores=90, qos="fixed-share"),
    ],
)
def test_a_card_held_differently_is_not_answered_from_its_twin(holder: Allocation) -> None:
    mx = load_topology("metax-8gpu-2zone")
    fixed = Allocation(pod_uid="f", index=0, memory_mib=8192, cores=30, qos="fixed-share")
    first = NodeState(
        name="mx-a", machine_type=mx.machine_type, devices=mx.devices, links=mx.links, allocations=(fixed,)
    )
    other = msgspec.structs.replace(first, name="mx-b", allocations=(holder,))
    request = PodRequest(
        uid="p",
        requests={"metax-tech.com/sgpu": "1", "metax-tech.com/vcore": "20", "metax-tech.com/vmemory": "8"},
        annotations={"metax-tech.com/sgpu-qos-policy": "fixed-share", "hami.io/gpu-scheduler-policy": "binpack"},
    )
    snap = Snapshot(nodes=(first, other))
    expected = uncached(snap, request, Mode.DEFAULT)
    assert encoded(snap, request, Mode.DEFAULT) == expected
    decision = place(snap, request)
    given = {v.node: v.devices for v in decision.alternatives}
    assert decision.node is not None
    given[decision.node] = tuple(a.index for a in decision.devices)
    assert given["mx-a"] == (0,)  # binpack joins the card of the same QoS
    assert given["mx-b"] != (0,)  # there card 0 cannot take the pod


def test_choose_devices_computes_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    # the per-node step is what bench.search_speed times: a repeat must not be a table lookup
    calls: list[str] = []
    evaluate = NodeAnswers.evaluate

    def counting(*args: object) -> object:
        calls.append("x")
        return evaluate(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(NodeAnswers, "evaluate", counting)
    dgx = fixture_node("dgx", "dgx1-v100", busy=[1])
    first = Engines.cached.choose_devices(dgx, pod(4))
    assert Engines.cached.choose_devices(dgx, pod(4)) == first == choose_devices(dgx, pod(4))
    assert len(calls) == 3
    assert Engines.cached.memo.entries() == 0  # nothing of it kept in the engine's tables


# --- keys ------------------------------------------------------------------------------------


def test_the_node_key_covers_every_field_but_the_names() -> None:
    fields = key_fields
    assert set(NodeState.__struct_fields__) == set(fields.KEYED_NODE_FIELDS) | set(fields.UNKEYED_NODE_FIELDS)
    assert set(Allocation.__struct_fields__) == set(fields.KEYED_ALLOCATION_FIELDS) | set(
        fields.UNKEYED_ALLOCATION_FIELDS
    )


keys = NodeKeys(Memo())  # the key tests' own keys


def test_nodes_differing_only_in_names_share_a_key() -> None:
    a = fixture_node("a", "dgx-h100", busy=[1, 2])
    b = msgspec.json.decode(msgspec.json.encode(msgspec.structs.replace(a, name="b")), type=NodeState)
    renamed = msgspec.structs.replace(
        b, allocations=tuple(msgspec.structs.replace(x, pod_uid=f"other-{x.index}") for x in b.allocations)
    )
    assert keys.node_key(a) == keys.node_key(b) == keys.node_key(renamed)


@pytest.mark.parametrize(
    "change",
    [
        {"machine_type": "other"},
        {"labels": {"zone": "a"}},
        {"annotations": {"metax-tech.com/gpu.topology.scores": "{}"}},
        {"ready": False},
        {"unschedulable": True},
        {"allocations": (Allocation(pod_uid="p", index=3),)},
        {"allocations": (Allocation(pod_uid="p", index=1, memory_mib=10),)},
        {"allocations": (Allocation(pod_uid="p", index=1, cores=10),)},
        {"allocations": (Allocation(pod_uid="p", index=1, qos="fixed-share"),)},
        {"allocations": (Allocation(pod_uid="p", index=1, app_class="online"),)},
        {"links": ()},
        {"devices": (gpu(0),)},
    ],
)
def test_any_other_difference_gives_another_key(change: dict[str, object]) -> None:
    base = fixture_node("a", "dgx-h100", busy=[1])
    assert keys.node_key(base) != keys.node_key(msgspec.structs.replace(base, **change))


def test_topology_keys_follow_values_not_identity() -> None:
    a = fixture_node("a", "dgx1-v100")
    b = msgspec.json.decode(msgspec.json.encode(a), type=NodeState)
    assert a.devices is not b.devices
    assert keys.topology_key(a) == keys.topology_key(b)
    assert keys.topology_key(a) != keys.topology_key(fixture_node("c", "dgx-h100"))


# --- bounds ----------------------------------------------------------------------------------


def test_a_bounded_cache_drops_the_least_recently_used_entry() -> None:
    table: BoundedCache[int, str] = BoundedCache(3)
    for i in range(3):
        table.put(i, str(i))
    assert table.get(0) == "0"  # 0 is now the most recent
    table.put(3, "3")
    assert len(table) == 3
    assert table.get(1) is None
    assert [table.get(i) for i in (0, 2, 3)] == ["0", "2", "3"]
    for i in range(100):
        table.put(100 + i, "x")
        assert len(table) <= 3


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="bound must be at least 1"):
        BoundedCache(0)


def test_interned_ids_are_never_given_to_another_value() -> None:
    interner: Interner[str] = Interner(2)
    first = interner.id_of("a")
    assert interner.id_of("a") == first
    interner.id_of("b")
    interner.id_of("c")  # evicts "a"
    assert len(interner) == 2
    again = interner.id_of("a")
    assert again != first
    assert again not in (interner.id_of("b"), interner.id_of("c"))


def test_an_identity_cache_misses_an_equal_but_distinct_object() -> None:
    table: IdentityCache[tuple[int, ...], int] = IdentityCache(4)
    key = tuple(range(5))
    table.put(key, 1)
    assert table.get(key) == 1
    assert table.get(tuple(range(5))) is None


def test_the_engine_tables_never_grow_past_their_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(answer_module, "RESULT_BOUND", 5)
    monkeypatch.setattr(nvidia_search, "SOLVED_BOUND", 3)
    Engines.cached = Engine()  # made with the small bounds
    results = Engines.cached.node_answers._results
    solved = Engines.cached.vendors.named("nvidia")._sets._solved  # type: ignore[attr-defined]
    rng = random.Random(7)
    snap = random_cluster(rng, 40)
    for count in (1, 2, 3, 4):
        request = pod(count)
        assert encoded(snap, request, Mode.DEFAULT) == uncached(snap, request, Mode.DEFAULT)
        assert len(results) == 5
        assert len(solved) <= 3
    sizes = Engines.cached.keys.sizes()
    assert sizes["states"] <= key_fields.NODE_BOUND and sizes["nodes_seen"] <= key_fields.NODE_BOUND
