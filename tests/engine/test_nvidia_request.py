"""Reading a pod's NVIDIA resources and HAMi annotations; bad values name the field."""

from __future__ import annotations

import pytest
from engine_builders import gpu, node, pod, snapshot

from engine import PodRequest, RequestError, place
from engine.node.registry import VendorContext
from engine.node.vendors.nvidia import GpuPolicy, NvidiaPlugin, NvidiaRequest

plugin = NvidiaPlugin(VendorContext.fresh())


def parse(request: PodRequest) -> NvidiaRequest:
    parsed = plugin.parse_request(request)
    assert isinstance(parsed, NvidiaRequest)
    return parsed


def test_a_count_alone_takes_whole_gpus_with_hami_defaults() -> None:
    parsed = parse(pod(2))
    assert parsed.count == 2
    assert parsed.whole
    assert parsed.cores == 100
    assert parsed.policies == (GpuPolicy.SPREAD,)
    assert parsed.node_policy == "binpack"
    assert not parsed.numa_bind


def test_shares_are_read_per_gpu() -> None:
    parsed = parse(pod(1, gpumem="8000", gpucores="30"))
    assert (parsed.whole, parsed.memory_mib, parsed.cores) == (False, 8000, 30)
    assert parse(pod(1, gpumem_percentage="25")).memory_for(gpu(0, memory=80000)) == 20000


def test_cores_only_share_takes_the_whole_memory_as_hami_does() -> None:
    parsed = parse(pod(1, gpucores="30"))
    assert parsed.memory_for(gpu(0, memory=80000)) == 80000
    assert parsed.cores == 30


def test_policy_comma_list() -> None:
    parsed = parse(pod(2, policy="topology-aware, numa"))
    assert parsed.topology
    assert parsed.numa_bind


def test_numa_bind_annotation() -> None:
    assert parse(pod(2, annotations={"nvidia.com/numa-bind": "true"})).numa_bind
    assert not parse(pod(2, annotations={"nvidia.com/numa-bind": "false"})).numa_bind


def test_uuid_and_type_lists() -> None:
    parsed = parse(pod(1, annotations={"nvidia.com/use-gpuuuid": "GPU-a, GPU-b", "nvidia.com/nouse-gputype": "A100"}))
    assert parsed.use_uuids == ("GPU-a", "GPU-b")
    assert parsed.nouse_types == ("A100",)


def test_no_nvidia_resource_is_not_ours() -> None:
    assert plugin.parse_request(PodRequest(uid="x", requests={"cpu": "2"})) is None
    assert plugin.parse_request(pod(0)) is None


@pytest.mark.parametrize(
    ("request_", "field", "words"),
    [
        (pod(None, gpu="two"), "nvidia.com/gpu", "not a Kubernetes quantity"),
        (pod(1, gpucores="150"), "nvidia.com/gpucores", "between 0 and 100"),
        (pod(1, gpumem_percentage="0"), "nvidia.com/gpumem-percentage", "between 1 and 100"),
        (pod(1, gpumem="1.5"), "nvidia.com/gpumem", "whole number"),
        (pod(None, gpumem="8000"), "nvidia.com/gpu", "is required"),
        (pod(1, gpumem="8000", gpumem_percentage="50"), "nvidia.com/gpumem-percentage", "cannot be combined"),
        (pod(1, policy="fastest"), "hami.io/gpu-scheduler-policy", "unknown policy 'fastest'"),
        (pod(1, policy="binpack,spread"), "hami.io/gpu-scheduler-policy", "exclude each other"),
        (pod(1, node_policy="random"), "hami.io/node-scheduler-policy", "binpack, spread or fragmentation"),
        (pod(1, annotations={"nvidia.com/numa-bind": "maybe"}), "nvidia.com/numa-bind", "true or false"),
    ],
)
def test_bad_values_raise_naming_the_field(request_: PodRequest, field: str, words: str) -> None:
    with pytest.raises(RequestError) as caught:
        plugin.parse_request(request_)
    assert caught.value.field == field
    assert words in caught.value.reason


def test_a_pod_without_device_resources_is_placed_by_the_node_rules_alone() -> None:
    decision = place(snapshot(node("n", [gpu(0)])), PodRequest(uid="x", requests={"cpu": "1"}))
    assert decision.node == "n"
    assert decision.devices == ()


def test_a_bad_cpu_request_names_the_field() -> None:
    with pytest.raises(RequestError) as caught:
        place(snapshot(node("n", [gpu(0)])), PodRequest(uid="x", requests={"cpu": "lots"}))
    assert caught.value.field == "requests.cpu"
