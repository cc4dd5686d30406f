"""Node policies as strategies: every policy works for every vendor, fed by the measures each vendor supplies.

The fragmentation cases are worked out by hand from FGD's measure (engine/node/fragmentation.py)
with the workload below: half the pods take a whole idle device, half take half a device.
A device half used is fragment to the whole-device class (500), so a half share that fills it
lowers the node's F by 250 (level 56), and one that halves an idle device raises it by 250 (level 43).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from engine_builders import gpu, node

from engine import Allocation, Decision, Engine, Mode, NodeState, PodRequest, RequestError, Snapshot
from engine.core.memo import Memo
from engine.core.model import WorkloadClass
from engine.node.policy import NodeMeasures, around
from engine.node.registry import VendorMissing, VendorRegistry
from engine.node.vendor import NodeScore, SetChoice
from engine.node.vendors import VENDOR_PACKAGES
from engine.node.vendors import registry as default_registry
from schemas.events import DeviceAssignment
from schemas.topology import Device, Vendor
from services.collector.node.topology_files import fixture_node_labels, load_topology

FRAG = "fragmentation"
NODE_POLICY = "hami.io/node-scheduler-policy"
WORKLOAD = (WorkloadClass(gpus=1, milli=1000, weight=0.5), WorkloadClass(gpus=1, milli=500, weight=0.5))
CARD_MEMORY = 65536


# --- MetaX: sGPU shares, measured like NVIDIA's ------------------------------------------------------


def card(index: int) -> Device:
    return Device(index=index, uuid=f"MX-{index}", vendor=Vendor.METAX, model="MXC500", memory_mib=CARD_MEMORY)


def metax_node(name: str, used: dict[int, int]) -> NodeState:
    """Two cards; `used`: thousandths of a card's memory and compute held per card."""
    allocations = tuple(
        Allocation(pod_uid=f"{name}-{i}", index=i, memory_mib=CARD_MEMORY * m // 1000, cores=m // 10, qos="best-effort")
        for i, m in sorted(used.items())
    )
    return NodeState(name=name, machine_type="metax", devices=(card(0), card(1)), allocations=allocations)


def metax_half(node_policy: str) -> PodRequest:
    """Half a card: 32 Gi of its 64 and half its compute."""
    requests = {"metax-tech.com/sgpu": "1", "metax-tech.com/vmemory": "32", "metax-tech.com/vcore": "50"}
    return PodRequest(uid="m", name="m", requests=requests, annotations={NODE_POLICY: node_policy})


def place(snapshot: Snapshot, request: PodRequest, mode: Mode = Mode.DEFAULT) -> Decision:
    return Engine().place(snapshot, request, mode)


def test_metax_fragmentation_fills_the_half_used_card_where_the_gpu_policy_would_spread() -> None:
    snap = Snapshot(nodes=(metax_node("a", {0: 500}),), workload=WORKLOAD)
    assert [d.index for d in place(snap, metax_half("binpack")).devices] == [1]  # spread cards (HAMi's default)
    decision = place(snap, metax_half(FRAG))
    assert [d.index for d in decision.devices] == [0]
    assert decision.score_parts["frag_delta"] == -250.0
    assert decision.score_parts["frag_level"] == 56.0


def test_metax_fragmentation_prefers_the_node_it_fragments_less_where_binpack_takes_the_fuller() -> None:
    # a: one card half used; b: one card three-quarters used (too little left for half), so b is fuller.
    snap = Snapshot(nodes=(metax_node("a", {0: 500}), metax_node("b", {0: 750})), workload=WORKLOAD)
    assert place(snap, metax_half("binpack")).node == "b"
    frag = place(snap, metax_half(FRAG))
    assert frag.node == "a"
    assert frag.score_parts["frag_level"] == 56.0  # b's: F 250 -> 500, level 43


def test_metax_fragmentation_without_a_workload_is_binpack() -> None:
    snap = Snapshot(nodes=(metax_node("a", {0: 500}), metax_node("b", {0: 750})))
    assert place(snap, metax_half(FRAG)) == place(snap, metax_half("binpack"))


# --- Neuron: whole devices and NeuronCores ------------------------------------------------------------


def inf2(name: str, *, whole: tuple[int, ...] = (), cores: dict[int, int] | None = None) -> NodeState:
    """inf2.48xlarge: 12 devices of 2 NeuronCores; `whole` held whole, `cores` NeuronCores held per device."""
    topology = load_topology("inf2.48xlarge", node=name)
    allocations = [Allocation(pod_uid=f"{name}-w{i}", index=i) for i in whole]
    allocations += [Allocation(pod_uid=f"{name}-c{i}", index=i, cores=n) for i, n in sorted((cores or {}).items())]
    return NodeState(
        name=name,
        machine_type=topology.machine_type,
        devices=topology.devices,
        links=topology.links,
        labels=fixture_node_labels("inf2.48xlarge"),
        allocations=tuple(allocations),
    )


def neuron_core(node_policy: str) -> PodRequest:
    return PodRequest(
        uid="n", name="n", requests={"aws.amazon.com/neuroncore": "1"}, annotations={NODE_POLICY: node_policy}
    )


def test_neuron_fragmentation_prefers_the_half_used_device_where_binpack_takes_the_fuller_node() -> None:
    # a: half its devices held whole (fuller, every free device idle); b: one core of device 0 held.
    snap = Snapshot(nodes=(inf2("a", whole=tuple(range(6))), inf2("b", cores={0: 1})), workload=WORKLOAD)
    assert place(snap, neuron_core("binpack")).node == "a"
    frag = place(snap, neuron_core(FRAG))
    assert frag.node == "b"
    assert [(d.index, d.cores) for d in frag.devices] == [(0, 1)]
    assert (frag.score_parts["frag_delta"], frag.score_parts["frag_level"]) == (-250.0, 56.0)


def test_neuron_fragmentation_measures_free_neuroncores_per_device() -> None:
    engine = Engine()
    state = inf2("a", cores={0: 1})
    plugin = engine.vendors.named("neuron")
    request = plugin.parse_request(neuron_core(FRAG))
    assert request is not None
    measures = plugin.measures(engine.node_answers.scratch(state, Mode.DEFAULT), request)
    shares = measures.free_shares(())
    assert (shares[0].milli, shares[0].idle) == (500, False)
    assert all((s.milli, s.idle) == (1000, True) for s in shares[1:])
    taken = (DeviceAssignment(index=0, uuid="", memory_mib=1, cores=1),)
    assert measures.free_shares(taken)[0].milli == 0
    assert measures.taken_milli(taken) == 500


@pytest.mark.parametrize(
    "request_",
    [metax_half(FRAG), neuron_core(FRAG)],
)
def test_mode_hami_refuses_fragmentation_for_every_vendor(request_: PodRequest) -> None:
    with pytest.raises(RequestError) as caught:
        place(Snapshot(nodes=(), workload=WORKLOAD), request_, Mode.HAMI)
    assert caught.value.field == NODE_POLICY
    assert "not a HAMi policy" in caught.value.reason


@pytest.mark.parametrize("request_", [metax_half("tetris"), neuron_core("tetris")])
def test_an_unknown_policy_names_the_registered_ones_for_every_vendor(request_: PodRequest) -> None:
    with pytest.raises(RequestError) as caught:
        place(Snapshot(nodes=()), request_)
    assert caught.value.field == NODE_POLICY
    assert caught.value.reason == "must be binpack, spread or fragmentation, got 'tetris'"


# --- a new policy: one class (a module), one registry entry, every vendor ---------------------------------


class FewestFree:
    """A policy of the test's own: the node with the least free share after the pod, no vendor terms."""

    name = "fewest-free"
    packs = True
    hami = False
    reads_workload = False

    def __init__(self, memo: Memo) -> None:
        self.memo = memo

    def score(self, measures: NodeMeasures, choice: SetChoice) -> NodeScore:
        free = sum(s.milli for s in measures.free_shares(choice.assignments))
        return NodeScore(score=-float(free), parts={"free": float(free)})

    def device_ranks(self, measures: NodeMeasures, options: Sequence[tuple[DeviceAssignment, ...]]) -> None:
        return None


def test_a_registered_policy_works_for_every_vendor() -> None:
    registry = VendorRegistry(default_registry.plugins, (*default_registry.policies, FewestFree))
    engine = Engine(registry)
    nvidia = (node("g-full", [gpu(0), gpu(1)], busy=(0,)), node("g-idle", [gpu(0), gpu(1)]))
    gpu_pod = PodRequest(uid="g", requests={"nvidia.com/gpu": "1"}, annotations={NODE_POLICY: "fewest-free"})
    assert engine.place(Snapshot(nodes=nvidia), gpu_pod).node == "g-full"
    metax = (metax_node("m-idle", {}), metax_node("m-half", {0: 500}))
    assert engine.place(Snapshot(nodes=metax), metax_half("fewest-free")).node == "m-half"
    neuron = (inf2("n-idle"), inf2("n-busy", whole=(0, 1)))
    assert engine.place(Snapshot(nodes=neuron), neuron_core("fewest-free")).node == "n-busy"
    assert engine.place(Snapshot(nodes=neuron), neuron_core("fewest-free")).score_parts["free"] == 9500.0


def test_a_policy_composes_its_term_between_the_vendors_own_terms() -> None:
    engine = Engine()
    state = node("n", [gpu(0), gpu(1)])
    plugin = engine.vendors.named("nvidia")
    request = plugin.parse_request(PodRequest(uid="g", requests={"nvidia.com/gpu": "2"}))
    assert request is not None
    choice = plugin.search(engine.node_answers.scratch(state, Mode.DEFAULT), request, state.devices)
    assert isinstance(choice, SetChoice)
    measures = plugin.measures(engine.node_answers.scratch(state, Mode.DEFAULT), request)
    score = around(measures, choice, True, 7.0, {"mine": 7.0})
    assert list(score.parts) == ["link", "mine", "remainder"]
    assert score.score == round(score.parts["link"] + 7.0 + score.parts["remainder"], 6)


def test_a_registered_policy_module_that_is_missing_fails_loudly() -> None:
    with pytest.raises(VendorMissing, match=r"'engine\.node\.policies\.tetris' is registered but cannot be imported"):
        VendorRegistry.of(VENDOR_PACKAGES, ("engine.node.policies.binpack", "engine.node.policies.tetris"))
