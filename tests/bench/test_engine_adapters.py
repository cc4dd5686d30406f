"""The benchmark's bridges to the real engine: trace requests, node states, and HAMi agreement."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from bench.cluster import MILLI
from bench.device_baselines import hami_v27
from bench.device_replay import HAMI_TOPOLOGY_AWARE
from bench.links import PairTable
from bench.topoplace_trace import TopoplaceTracePolicy, engine_request, node_state
from bench.trace_topology import fixture_for, trace_machine
from engine import Allocation, Mode, NodeState, PodRequest, choose_devices
from services.collector.node.topology_files import load_topology
from tests.bench.helpers import cluster, node, pod


def test_model_mapping():
    assert fixture_for("V100M32", 8) == "dgx1-v100"
    assert fixture_for("G2", 8) == "pcie-8gpu-2socket"
    assert fixture_for("T4", 4) == "pcie-4gpu"
    assert fixture_for("P100", 2) == "pcie-4gpu"
    with pytest.raises(ValueError, match="gpus: no documented topology for a 6-GPU"):
        fixture_for("T4", 6)
    machine = trace_machine("P100", 2)
    assert len(machine.devices) == 2 and all(d.model == "P100" for d in machine.devices)
    assert {(link.src, link.dst) for link in machine.links} <= {(0, 1), (1, 0)}


def test_trace_share_becomes_memory_and_cores_of_one_gpu():
    machine = trace_machine("T4", 4)  # 16,000 MiB per GPU in the benchmark's units
    request = engine_request(pod(gpu_milli=470), machine)
    assert request.requests == {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(470 * 16), "nvidia.com/gpucores": "47"}
    assert engine_request(pod(num_gpu=4, gpu_milli=MILLI), machine).requests == {"nvidia.com/gpu": "4"}


def test_node_state_carries_the_shares_as_allocations():
    machine = trace_machine("T4", 4)
    state = node_state("n", machine, ((1000,), (), (300, 200), ()))
    whole = [a for a in state.allocations if a.index == machine.devices[0].index]
    shared = [a for a in state.allocations if a.index == machine.devices[2].index]
    assert whole[0].memory_mib == 0 and whole[0].cores == 100
    assert sorted(a.memory_mib for a in shared) == [200 * 16, 300 * 16]


def test_topoplace_policy_places_where_the_engine_says_and_respects_the_prefilter():
    state = cluster([node("a", gpus=4), node("b", gpus=4, cpu=500)])
    policy = TopoplaceTracePolicy(state, [], Mode.DEFAULT)
    choice = policy.choose(
        pod(num_gpu=2, cpu=1000), np.flatnonzero(state.feasible(pod(num_gpu=2, cpu=1000))), np.random.default_rng(0)
    )
    assert choice is not None and choice.node == 0 and len(choice.gpus) == 2
    state.place(pod(num_gpu=2, cpu=1000), choice)
    policy.placed(pod(num_gpu=2, cpu=1000), choice)
    assert sorted(len(s) for s in policy.shares[0]) == [0, 0, 1, 1]
    calls = policy.engine_calls
    policy.choose(pod(num_gpu=2, cpu=1000), np.array([0]), np.random.default_rng(0))
    policy.choose(pod(num_gpu=2, cpu=1000), np.array([0]), np.random.default_rng(0))
    assert policy.engine_calls == calls + 1  # the second ask about the same node state is answered from the cache


def test_hami_reimplementation_agrees_with_the_engine_hami_mode_on_dgx1():
    """Two independent readings of HAMi v2.7's topology-aware rule must choose the same GPUs."""
    topo = load_topology("dgx1-v100")
    table = PairTable([d.index for d in topo.devices], topo.links, [d.numa_node for d in topo.devices])
    checked = 0
    for busy in itertools.chain.from_iterable(itertools.combinations(range(8), r) for r in (0, 1, 2, 3)):
        free = [p for p in range(8) if p not in busy]
        for k in (1, 2, 4):
            state = NodeState(
                name="x",
                machine_type=topo.machine_type,
                devices=topo.devices,
                links=topo.links,
                allocations=tuple(Allocation(pod_uid=f"b{b}", index=topo.devices[b].index) for b in busy),
            )
            engine = choose_devices(
                state,
                PodRequest(uid="p", requests={"nvidia.com/gpu": str(k)}, annotations=HAMI_TOPOLOGY_AWARE),
                Mode.HAMI,
            )
            ours = hami_v27(table, free, k)
            assert set(engine.devices) == {topo.devices[p].index for p in ours}, (busy, k)
            checked += 1
    assert checked == 93 * 3
