"""AWS Neuron through engine.place(): blocks, windows, NeuronCores and every unschedulable reason.

Nodes come from the collector's trn1.32xlarge (16 devices x 2 NeuronCores)
and inf2.48xlarge (12 devices x 2) fixtures, with their instance-type labels.
"""

from __future__ import annotations

import msgspec
import pytest
from engine_builders import place

from engine import (
    Allocation,
    Decision,
    Mode,
    NodeState,
    PodRequest,
    RequestError,
    Snapshot,
)
from services.collector.node.topology_files import fixture_node_labels, load_topology

NEURON = "aws.amazon.com/neuron"
CORE = "aws.amazon.com/neuroncore"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
BOTH_MODES = pytest.mark.parametrize("mode", [Mode.DEFAULT, Mode.HAMI])


def aws_node(
    fixture: str,
    name: str = "n-a",
    *,
    whole: tuple[int, ...] = (),
    cores: dict[int, int] | None = None,
    labels: dict[str, str] | None = None,
) -> NodeState:
    """`whole` = devices held whole by other pods, `cores` = NeuronCores held per device."""
    topology = load_topology(fixture, node=name)
    allocations = [Allocation(pod_uid=f"w-{i}", index=i) for i in whole]
    allocations += [Allocation(pod_uid=f"c-{i}", index=i, cores=n) for i, n in sorted((cores or {}).items())]
    return NodeState(
        name=name,
        machine_type=topology.machine_type,
        devices=topology.devices,
        links=topology.links,
        labels=fixture_node_labels(fixture) if labels is None else labels,
        allocations=tuple(allocations),
    )


def trn1(
    name: str = "n-a",
    *,
    whole: tuple[int, ...] = (),
    cores: dict[int, int] | None = None,
    labels: dict[str, str] | None = None,
) -> NodeState:
    return aws_node("trn1.32xlarge", name, whole=whole, cores=cores, labels=labels)


def inf2(
    name: str = "n-a",
    *,
    whole: tuple[int, ...] = (),
    cores: dict[int, int] | None = None,
    labels: dict[str, str] | None = None,
) -> NodeState:
    return aws_node("inf2.48xlarge", name, whole=whole, cores=cores, labels=labels)


def pod(requests: dict[str, str], annotations: dict[str, str] | None = None) -> PodRequest:
    return PodRequest(uid="pod-1", requests=requests, annotations=annotations or {})


def takes(decision: Decision) -> list[tuple[int, int]]:
    return [(a.index, a.cores) for a in decision.devices]


def only_reason(decision: Decision) -> str:
    assert decision.node is None
    assert len(decision.alternatives) == 1
    return decision.alternatives[0].reason


def test_fixture_geometry() -> None:
    for fixture, devices in (("trn1.32xlarge", 16), ("inf2.48xlarge", 12)):
        topology = load_topology(fixture)
        assert len(topology.devices) == devices
        assert {d.cores for d in topology.devices} == {2}
        assert fixture_node_labels(fixture)[INSTANCE_TYPE] == fixture


# --- Trainium blocks -------------------------------------------------------------------------------


@BOTH_MODES
@pytest.mark.parametrize("count", [1, 4, 8, 16])
def test_trainium_takes_an_aligned_block(mode: Mode, count: int) -> None:
    decision = place(Snapshot(nodes=(trn1(),)), pod({NEURON: str(count)}), mode)
    got = [i for i, _c in takes(decision)]
    assert len(got) == count
    assert got[0] % count == 0 and got == list(range(got[0], got[0] + count))
    assert all(c == 2 for _i, c in takes(decision))  # whole devices: both NeuronCores


@BOTH_MODES
@pytest.mark.parametrize("count", [2, 3, 5, 12])
def test_trainium_illegal_sizes_are_unschedulable_with_the_reason(mode: Mode, count: int) -> None:
    decision = place(Snapshot(nodes=(trn1(),)), pod({NEURON: str(count)}), mode)
    reason = only_reason(decision)
    assert "1, 4, 8 or 16" in reason and f"{count} were requested" in reason
    assert "Illegal aws.amazon.com/neuron count for Trainium" in decision.reason


@BOTH_MODES
def test_trainium_block_skips_a_broken_block(mode: Mode) -> None:
    decision = place(Snapshot(nodes=(trn1(whole=(1,)),)), pod({NEURON: "4"}), mode)
    assert [i for i, _c in takes(decision)] == [4, 5, 6, 7]


def test_trainium_default_mode_protects_the_free_block_of_eight() -> None:
    # devices 4-7 are busy: blocks of 4 free at 0, 8, 12; 0-3 keeps the 8-block 8-15 whole
    decision = place(Snapshot(nodes=(trn1(whole=(4, 5, 6, 7)),)), pod({NEURON: "4"}))
    assert [i for i, _c in takes(decision)] == [0, 1, 2, 3]
    assert decision.score_parts["largest_free_group_after"] == 8.0


def test_trainium_no_aligned_block_left() -> None:
    decision = place(Snapshot(nodes=(trn1(whole=(0, 5, 10, 15)),)), pod({NEURON: "4"}))
    assert "no free aligned block of 4" in only_reason(decision)


# --- Inferentia windows ----------------------------------------------------------------------------


@BOTH_MODES
def test_inferentia_takes_a_contiguous_window(mode: Mode) -> None:
    decision = place(Snapshot(nodes=(inf2(whole=(0, 4)),)), pod({NEURON: "3"}), mode)
    got = [i for i, _c in takes(decision)]
    assert got == [1, 2, 3]  # HAMi: the first window; default: the run that fits best (1-3 leaves 5-11 whole)


@BOTH_MODES
def test_inferentia_windows_do_not_wrap_around(mode: Mode) -> None:
    node = inf2(whole=tuple(range(1, 10)))  # free: 10, 11, 0
    reason = only_reason(place(Snapshot(nodes=(node,)), pod({NEURON: "3"}), mode))
    assert "no wrap-around" in reason and "longest free run is 2" in reason


# --- NeuronCores ----------------------------------------------------------------------------------


@BOTH_MODES
def test_one_core_goes_to_a_device_with_a_free_core(mode: Mode) -> None:
    node = trn1(cores={i: 2 for i in range(16) if i != 6} | {6: 1})  # only device 6 has a free core
    assert takes(place(Snapshot(nodes=(node,)), pod({CORE: "1"}), mode)) == [(6, 1)]


def test_one_core_fills_a_partly_used_device_first() -> None:
    decision = place(Snapshot(nodes=(inf2(cores={9: 1}),)), pod({CORE: "1"}))
    assert takes(decision) == [(9, 1)]


def test_a_core_share_carries_its_share_of_the_device_memory() -> None:
    # 32 GiB and 2 NeuronCores per inf2 device: one core holds half; a whole device says 0 (= all)
    device_memory = load_topology("inf2.48xlarge").devices[0].memory_mib
    odd = place(Snapshot(nodes=(inf2(),)), pod({CORE: "3"}))
    assert [(a.cores, a.memory_mib) for a in odd.devices] == [(2, 0), (1, device_memory // 2)]
    whole = place(Snapshot(nodes=(inf2(),)), pod({NEURON: "1"}))
    assert [(a.cores, a.memory_mib) for a in whole.devices] == [(2, 0)]


@BOTH_MODES
def test_two_cores_take_one_device_with_two_free(mode: Mode) -> None:
    decision = place(Snapshot(nodes=(inf2(cores={i: 1 for i in range(11)}),)), pod({CORE: "2"}), mode)
    assert takes(decision) == [(11, 2)]


@BOTH_MODES
def test_even_cores_take_whole_devices(mode: Mode) -> None:
    decision = place(Snapshot(nodes=(trn1(),)), pod({CORE: "8"}), mode)
    got = takes(decision)
    assert [c for _i, c in got] == [2, 2, 2, 2]
    assert got[0][0] % 4 == 0 and [i for i, _c in got] == list(range(got[0][0], got[0][0] + 4))


def test_even_cores_on_trainium_need_a_legal_device_count() -> None:
    reason = only_reason(place(Snapshot(nodes=(trn1(),)), pod({CORE: "6"})))
    assert "6 NeuronCores = 3 whole devices" in reason and "1, 4, 8 or 16" in reason


@BOTH_MODES
def test_odd_cores_take_contiguous_cores_across_adjacent_devices(mode: Mode) -> None:
    decision = place(Snapshot(nodes=(inf2(whole=(0,), cores={1: 1}),)), pod({CORE: "5"}), mode)
    got = takes(decision)
    assert sum(c for _i, c in got) == 5
    indices = [i for i, _c in got]
    assert indices == list(range(indices[0], indices[0] + len(indices)))
    # only the first device of the run may be partly used before (its free top cores)
    assert all(c == 2 for _i, c in got[1:-1])


def test_odd_cores_use_the_half_free_device() -> None:
    decision = place(Snapshot(nodes=(inf2(whole=(0,), cores={1: 1}),)), pod({CORE: "5"}))
    assert takes(decision) == [(1, 1), (2, 2), (3, 2)]


def test_odd_cores_on_trainium_stay_in_one_aligned_block() -> None:
    # 4-7 free only as 5, 6, 7 (4 busy): 5 cores from device 5 would need 5, 6, 7 = 6 cores - fits 5.
    node = trn1(whole=(0, 1, 2, 3, 4, *range(8, 16)))
    assert takes(place(Snapshot(nodes=(node,)), pod({CORE: "5"}))) == [(5, 2), (6, 2), (7, 1)]
    # 7 cores need 4 devices: none left inside one block
    reason = only_reason(place(Snapshot(nodes=(node,)), pod({CORE: "7"})))
    assert "7 contiguous free NeuronCores" in reason


def test_cores_when_every_core_is_taken() -> None:
    decision = place(Snapshot(nodes=(inf2(whole=tuple(range(12))),)), pod({CORE: "1"}))
    reason = only_reason(decision)
    assert "0 of 12 Neuron devices free" in reason and "all 2 NeuronCores taken" in reason


# --- node level, instance types, indices ----------------------------------------------------------


def test_nodes_rank_by_remainder_damage_and_fill() -> None:
    # binpack: the node whose largest free block shrinks least and that is fuller wins
    empty = trn1(name="n-empty")
    half = trn1(name="n-half", whole=tuple(range(8)))
    decision = place(Snapshot(nodes=(empty, half)), pod({NEURON: "4"}))
    assert decision.node == "n-half"
    spread = place(Snapshot(nodes=(empty, half)), pod({NEURON: "1"}, {"hami.io/node-scheduler-policy": "spread"}))
    assert spread.node == "n-empty"


def test_an_unknown_instance_type_is_unschedulable_in_default_mode() -> None:
    node = trn1(labels={INSTANCE_TYPE: "p4d.24xlarge"})
    reason = only_reason(place(Snapshot(nodes=(node,)), pod({NEURON: "4"})))
    assert "'p4d.24xlarge' is neither Inferentia" in reason


def test_a_missing_label_falls_back_to_the_machine_type_with_a_warning() -> None:
    node = inf2(labels={})
    decision = place(Snapshot(nodes=(node,)), pod({NEURON: "3"}))
    assert [i for i, _c in takes(decision)] == [0, 1, 2]
    assert any(INSTANCE_TYPE in w for w in decision.warnings)
    # HAMi reads the missing label as "" and applies the Trainium rule: 3 is illegal
    assert place(Snapshot(nodes=(node,)), pod({NEURON: "3"}), Mode.HAMI).node is None


@BOTH_MODES
def test_device_index_not_list_position(mode: Mode) -> None:
    node = inf2(whole=(0,))
    listed_backwards = msgspec.structs.replace(node, devices=tuple(reversed(node.devices)))
    decision = place(Snapshot(nodes=(listed_backwards,)), pod({NEURON: "2"}), mode)
    got = [i for i, _c in takes(decision)]
    assert 0 not in got and got == [got[0], got[0] + 1]
    by_index = {d.index: d.uuid for d in node.devices}
    assert all(a.uuid == by_index[a.index] for a in decision.devices)


def test_unhealthy_device_breaks_windows() -> None:
    node = inf2()
    sick = tuple(msgspec.structs.replace(d, healthy=False) if d.index == 1 else d for d in node.devices)
    decision = place(Snapshot(nodes=(msgspec.structs.replace(node, devices=sick),)), pod({NEURON: "2"}))
    assert 1 not in [i for i, _c in takes(decision)]


@pytest.mark.parametrize(
    ("requests", "field"),
    [
        ({NEURON: "1", CORE: "2"}, CORE),
        ({NEURON: "1.5"}, NEURON),
        ({CORE: "-1"}, CORE),
    ],
)
def test_malformed_requests_name_the_field(requests: dict[str, str], field: str) -> None:
    with pytest.raises(RequestError) as caught:
        place(Snapshot(nodes=(inf2(),)), pod(requests))
    assert caught.value.field == field


def test_two_cores_without_a_device_holding_both() -> None:
    node = inf2(cores={i: 1 for i in range(12)})
    assert "no Neuron device has 2 free NeuronCore(s)" in only_reason(place(Snapshot(nodes=(node,)), pod({CORE: "2"})))


def test_whole_devices_skip_partly_used_ones_with_the_reason() -> None:
    node = inf2(cores={i: 1 for i in range(12)})
    reason = only_reason(place(Snapshot(nodes=(node,)), pod({NEURON: "1"})))
    assert "0 of 12 Neuron devices free" in reason and "takes whole idle devices" in reason
