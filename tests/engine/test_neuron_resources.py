"""The Neuron device plugin's resource names, through engine.place().

The plugin advertises whole devices as `aws.amazon.com/neurondevice` (its older name
`aws.amazon.com/neuron` too, the one HAMi's default configuration reads) and their NeuronCores
as `aws.amazon.com/neuroncore`: 2 per device on trn1 and inf2, 8 per trn2 device at LNC=1. A pod
asks whole devices by either name, or NeuronCores; the devices keep the instance family's
layout (an aligned block on Trainium, a window of the ring on Inferentia).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_builders import place
from test_cli_cluster import as_list, k8s_node, k8s_pod, run
from test_neuron_place import BOTH_MODES, inf2, only_reason, pod, takes, trn1

from engine import Decision, Mode, NodeState, RequestError, Snapshot
from schemas.topology import Device, Vendor
from schemas.vendors import NEURON as NEURON_DEVICES

NEURONDEVICE = "aws.amazon.com/neurondevice"
NEURON = "aws.amazon.com/neuron"
CORE = "aws.amazon.com/neuroncore"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"


def trn2_lnc1(name: str = "n-a") -> NodeState:
    """A trn2.48xlarge at LNC=1: 16 devices of 8 NeuronCores (links are not published for it)."""
    devices = tuple(
        Device(index=i, uuid=f"NEURON-{i}", vendor=Vendor.NEURON, model="Trainium2", memory_mib=96 * 1024, cores=8)
        for i in range(16)
    )
    return NodeState(name=name, machine_type="trn2.48xlarge", devices=devices, labels={INSTANCE_TYPE: "trn2.48xlarge"})


def indices(decision: Decision) -> list[int]:
    return [i for i, _c in takes(decision)]


def test_the_descriptor_names_the_device_plugins_resources() -> None:
    assert NEURON_DEVICES.whole == NEURONDEVICE
    assert NEURON_DEVICES.whole_names == (NEURONDEVICE, NEURON)
    assert NEURON_DEVICES.cores == CORE
    assert NEURON_DEVICES.advertised == (NEURONDEVICE, NEURON)


# (node, requests, the devices taken with their cores): a legal group of the family; on an idle node
# the default mode keeps the longest free groups, then takes the lowest first index
TABLE = [
    ("trn1", {NEURONDEVICE: "1"}, [(0, 2)]),
    ("trn1", {NEURONDEVICE: "4"}, [(0, 2), (1, 2), (2, 2), (3, 2)]),
    ("trn1", {NEURONDEVICE: "16"}, [(i, 2) for i in range(16)]),
    ("trn1", {CORE: "1"}, [(0, 1)]),
    ("trn1", {CORE: "2"}, [(0, 2)]),
    ("trn1", {CORE: "8"}, [(0, 2), (1, 2), (2, 2), (3, 2)]),
    ("inf2", {NEURONDEVICE: "3"}, [(0, 2), (1, 2), (2, 2)]),
    ("inf2", {NEURONDEVICE: "12"}, [(i, 2) for i in range(12)]),
    ("inf2", {CORE: "6"}, [(0, 2), (1, 2), (2, 2)]),
    ("inf2", {CORE: "3"}, [(0, 2), (1, 1)]),
    ("trn2", {CORE: "8"}, [(0, 8)]),
    ("trn2", {CORE: "3"}, [(0, 3)]),
    ("trn2", {CORE: "32"}, [(0, 8), (1, 8), (2, 8), (3, 8)]),
    ("trn2", {NEURONDEVICE: "4"}, [(0, 8), (1, 8), (2, 8), (3, 8)]),
]
NODES = {"trn1": trn1, "inf2": inf2, "trn2": trn2_lnc1}


@pytest.mark.parametrize(("node", "requests", "expected"), TABLE)
def test_each_resource_takes_the_familys_legal_group(
    node: str, requests: dict[str, str], expected: list[tuple[int, int]]
) -> None:
    decision = place(Snapshot(nodes=(NODES[node](),)), pod(requests))
    assert decision.node == "n-a", decision.reason
    assert takes(decision) == expected


@BOTH_MODES
@pytest.mark.parametrize("node", ["trn1", "inf2"])
@pytest.mark.parametrize("count", [1, 4])
def test_neurondevice_and_the_older_neuron_choose_the_same_devices(node: str, count: int, mode: Mode) -> None:
    busy = NODES[node]
    current = place(Snapshot(nodes=(busy(),)), pod({NEURONDEVICE: str(count)}), mode)
    older = place(Snapshot(nodes=(busy(),)), pod({NEURON: str(count)}), mode)
    assert len(indices(current)) == count
    assert takes(current) == takes(older)


@BOTH_MODES
def test_neurondevice_keeps_trainiums_aligned_blocks(mode: Mode) -> None:
    decision = place(Snapshot(nodes=(trn1(whole=(1,)),)), pod({NEURONDEVICE: "4"}), mode)
    assert indices(decision) == [4, 5, 6, 7]


@BOTH_MODES
def test_neurondevice_keeps_inferentias_ring_windows(mode: Mode) -> None:
    decision = place(Snapshot(nodes=(inf2(whole=(0, 4)),)), pod({NEURONDEVICE: "3"}), mode)
    assert indices(decision) == [1, 2, 3]
    reason = only_reason(place(Snapshot(nodes=(inf2(whole=tuple(range(1, 10))),)), pod({NEURONDEVICE: "3"}), mode))
    assert "no wrap-around" in reason


@BOTH_MODES
def test_an_illegal_trainium_count_names_the_resource_asked(mode: Mode) -> None:
    decision = place(Snapshot(nodes=(trn1(),)), pod({NEURONDEVICE: "3"}), mode)
    assert "1, 4, 8 or 16" in only_reason(decision)
    assert f"Illegal {NEURONDEVICE} count for Trainium" in decision.reason


def test_neurondevice_takes_only_idle_devices() -> None:
    node = trn1(cores={i: 1 for i in range(16)})  # one core of every device taken
    decision = place(Snapshot(nodes=(node,)), pod({NEURONDEVICE: "1"}))
    assert decision.node is None
    assert NEURONDEVICE in decision.reason


@pytest.mark.parametrize(
    ("requests", "field"),
    [
        ({NEURONDEVICE: "1", CORE: "2"}, CORE),
        ({NEURONDEVICE: "1", NEURON: "1"}, NEURON),
        ({NEURON: "1", CORE: "2"}, CORE),
    ],
)
def test_two_neuron_resources_in_one_pod_are_refused_naming_the_field(requests: dict[str, str], field: str) -> None:
    with pytest.raises(RequestError) as caught:
        place(Snapshot(nodes=(trn1(),)), pod(requests))
    assert caught.value.field == field
    assert "cannot be combined" in str(caught.value)


# --- a cluster of Kubernetes objects (`engine place --cluster`): devices counted from the Node ------------


@pytest.mark.parametrize(
    "advertised",
    [
        {NEURONDEVICE: "16", CORE: "32"},  # today's device plugin without the older name
        {NEURONDEVICE: "16", NEURON: "16", CORE: "32"},  # both names: the same 16 devices, counted once
    ],
)
def test_a_node_known_by_its_object_counts_neurondevice(
    advertised: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = k8s_node("trn", labels={INSTANCE_TYPE: "trn1.32xlarge"}, **advertised)
    running = k8s_pod("held", node="trn")
    running["spec"]["containers"][0]["resources"]["limits"] = {NEURONDEVICE: "4"}
    new = k8s_pod("new")
    new["spec"]["containers"][0]["resources"]["limits"] = {NEURONDEVICE: "8"}
    code, answer, _ = run(tmp_path, as_list(node, running), new, capsys=capsys)
    assert code == 0 and answer["node"] == "trn"
    # the running pod holds the lowest 4 of 16 devices: the only free aligned block of 8 is 8-15
    assert [d["index"] for d in answer["devices"]] == list(range(8, 16))
