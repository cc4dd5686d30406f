"""The engine's request parsing on random PodRequests: a decision, or RequestError naming the field.

Requests mix the resource names and annotations the vendors read with arbitrary ones, and values
from valid quantities to garbage; any other exception is a crash.
"""

from __future__ import annotations

import pytest
from fuzz_profile import FUZZ
from hypothesis import given
from hypothesis import strategies as st

import engine
from engine import Mode, NodeState, PodRequest, Snapshot
from schemas.errors import FieldError
from services.collector.node.topology_files import load_topology
from services.placer.requests import request_error_text

FIXTURES = ("dgx-h100", "dgx1-v100", "pcie-4gpu", "metax-8gpu-2zone", "trn1.32xlarge", "inf2.48xlarge")
RESOURCES = (
    "nvidia.com/gpu",
    "nvidia.com/gpumem",
    "nvidia.com/gpumem-percentage",
    "nvidia.com/gpucores",
    "metax-tech.com/sgpu",
    "metax-tech.com/vcore",
    "metax-tech.com/vmemory",
    "metax-tech.com/gpu",
    "aws.amazon.com/neuron",
    "aws.amazon.com/neuroncore",
    "cpu",
    "memory",
    "pods",
)
ANNOTATIONS = (
    "hami.io/node-scheduler-policy",
    "hami.io/gpu-scheduler-policy",
    "nvidia.com/use-gpuuuid",
    "nvidia.com/nouse-gpuuuid",
    "nvidia.com/use-gputype",
    "nvidia.com/nouse-gputype",
    "metax-tech.com/sgpu-topology-aware",
    "metax-tech.com/use-gpuuuid",
    "metax-tech.com/nouse-gpuuuid",
    "metax-tech.com/sgpu-qos-policy",
    "metax-tech.com/sgpu-app-class",
    "aws.amazon.com/use-neuron-uuid",
    "aws.amazon.com/nouse-neuron-uuid",
    "topoplace.io/network",
)
WORDS = ("binpack", "spread", "topology-aware", "true", "false", "best-effort", "online", "GPU-0", "", "0")

QUANTITY = st.one_of(
    st.integers(min_value=-3, max_value=20).map(str),
    st.integers(min_value=0, max_value=10**12).map(str),
    st.sampled_from(["500m", "1.5", "4Gi", "80G", "1e3", "0x10", "-1", "", " 2", "2 ", "1/2", "∞", "NaN"]),
    st.text(max_size=8),
)
VALUE = st.one_of(st.sampled_from(WORDS), st.text(max_size=16))

REQUESTS = st.builds(
    PodRequest,
    uid=st.text(min_size=1, max_size=8),
    name=st.text(max_size=8),
    requests=st.dictionaries(st.one_of(st.sampled_from(RESOURCES), st.text(max_size=12)), QUANTITY, max_size=5),
    annotations=st.dictionaries(st.one_of(st.sampled_from(ANNOTATIONS), st.text(max_size=12)), VALUE, max_size=4),
    labels=st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=2),
    node_selector=st.dictionaries(
        st.sampled_from(["topoplace.io/machine-type", "kubernetes.io/hostname", "x"]), VALUE, max_size=2
    ),
)


def _snapshot() -> Snapshot:
    nodes = []
    for fixture in FIXTURES:
        topology = load_topology(fixture, node=f"{fixture}-0")
        nodes.append(
            NodeState(
                name=topology.node,
                machine_type=topology.machine_type,
                devices=topology.devices,
                links=topology.links,
                labels={"topoplace.io/machine-type": topology.machine_type},
            )
        )
    return Snapshot(nodes=tuple(nodes))


SNAPSHOT = _snapshot()


@pytest.mark.parametrize("mode", list(Mode))
@FUZZ
@given(request=REQUESTS)
def test_random_requests_get_a_decision_or_an_error_naming_the_field(mode: Mode, request: PodRequest) -> None:
    try:
        decision = engine.place(SNAPSHOT, request, mode)
    except FieldError as exc:
        # What the placer writes into the pod's FailedScheduling reason: "invalid request: <field>: <reason>".
        assert exc.field, f"no field named: {exc!r}"
        assert request_error_text(exc).startswith(f"{exc.field}: ")
        return
    if decision.node is None:
        assert decision.reason, "an unschedulable decision carries its reason"
    else:
        assert decision.node in {n.name for n in SNAPSHOT.nodes}
        node = next(n for n in SNAPSHOT.nodes if n.name == decision.node)
        indexes = {d.index for d in node.devices}
        assert all(d.index in indexes for d in decision.devices)
