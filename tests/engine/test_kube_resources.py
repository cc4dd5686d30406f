"""NodeResourcesFit and a pod's effective request, from kube-scheduler's fit_test.go tables."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from engine.decide.kube.resources import (
    InitContainerRequest,
    effective_pod_request,
    fit_failures,
    is_scalar_resource,
    parse_requests,
)
from engine.node.vendor import RequestError

EXT_A, EXT_B = "example.com/aaa", "example.com/bbb"


def res(cpu_m: int = 0, mem: int = 0, **scalars: int) -> dict[str, int]:
    """kube's test units (milli-cpu, bytes, whole scalar units) -> milli-units."""
    amounts = {"cpu": cpu_m, "memory": mem * 1000}
    amounts.update({name.replace("__", "/").replace("_", "-"): n * 1000 for name, n in scalars.items()})
    return {name: n for name, n in amounts.items() if n}


def node_alloc(**extra: int) -> dict[str, int]:
    # kube's makeAllocatableResources(10, 20, 32, 5, 20, 5): cpu 10m, memory 20, pods 32, extendedA 5,
    # ephemeral-storage 20, hugepages-2Mi 5
    return {**res(10, 20), "pods": 32_000, EXT_A: 5000, "ephemeral-storage": 20_000, "hugepages-2Mi": 5000, **extra}


def pod_request(containers: list[dict[str, int]], inits: Sequence[dict[str, int]] = ()) -> dict[str, int]:
    return effective_pod_request(containers, [InitContainerRequest(requests=r) for r in inits])


@pytest.mark.parametrize(
    ("request_", "used", "reasons"),
    [
        # no resources requested always fits
        (pod_request([{}]), res(10, 20), []),
        # too many resources fails
        (pod_request([res(1, 1)]), res(10, 20), ["Insufficient cpu", "Insufficient memory"]),
        # init containers: the largest one counts, not their sum
        (pod_request([res(1, 1)], [res(3, 1)]), res(8, 19), ["Insufficient cpu"]),
        (pod_request([res(1, 1)], [res(3, 1), res(2, 1)]), res(8, 19), ["Insufficient cpu"]),
        (pod_request([res(1, 1)], [res(1, 3)]), res(9, 19), ["Insufficient memory"]),
        (pod_request([res(1, 1)], [res(1, 1)]), res(9, 19), []),
        # both fit, one fits, the equal edge case
        (pod_request([res(1, 1)]), res(5, 5), []),
        (pod_request([res(2, 1)]), res(9, 5), ["Insufficient cpu"]),
        (pod_request([res(1, 2)]), res(5, 19), ["Insufficient memory"]),
        (pod_request([res(5, 1)]), res(5, 19), []),
        # extended resources
        (pod_request([{EXT_A: 1000}]), {}, []),
        (pod_request([{EXT_A: 10_000}]), {}, [f"Insufficient {EXT_A}"]),
        (pod_request([{EXT_A: 1000}]), {EXT_A: 5000}, [f"Insufficient {EXT_A}"]),
        (pod_request([{}], [{EXT_A: 3000}, {EXT_A: 2000}]), {EXT_A: 2000}, []),
        (pod_request([{}], [{EXT_A: 6000}]), {}, [f"Insufficient {EXT_A}"]),
        # an extended resource the node does not report counts as none
        (pod_request([{EXT_B: 1000}]), {}, [f"Insufficient {EXT_B}"]),
        # kubernetes.io/ resources and hugepages are checked too
        (pod_request([{"kubernetes.io/something": 10_000}]), {}, ["Insufficient kubernetes.io/something"]),
        (pod_request([{"hugepages-2Mi": 10_000}]), {}, ["Insufficient hugepages-2Mi"]),
        (pod_request([{"hugepages-2Mi": 2000}]), {"hugepages-2Mi": 4000}, ["Insufficient hugepages-2Mi"]),
        # ephemeral storage
        (pod_request([{"ephemeral-storage": 25_000}]), {}, ["Insufficient ephemeral-storage"]),
        (pod_request([{"ephemeral-storage": 10_000}]), {}, []),
        # a request of zero is never a failure, even for a resource the node lacks
        (pod_request([{EXT_B: 0, "cpu": 0}]), res(10, 20), []),
        # a bare name that is no resource kube knows is not checked
        (pod_request([{"foo": 10_000}]), {}, []),
        # several failures come in kube's order: cpu, memory, ephemeral-storage, then scalars by name
        (
            pod_request([{**res(1, 1), "ephemeral-storage": 21_000, EXT_B: 1000, EXT_A: 9000}]),
            res(10, 20),
            [
                "Insufficient cpu",
                "Insufficient memory",
                "Insufficient ephemeral-storage",
                f"Insufficient {EXT_A}",
                f"Insufficient {EXT_B}",
            ],
        ),
    ],
)
def test_enough_requests(request_: dict[str, int], used: dict[str, int], reasons: list[str]) -> None:
    assert fit_failures(request_, node_alloc(), used, pod_count=0) == reasons


def test_ignored_extended_resources_are_skipped_but_not_native_ones() -> None:
    request = {EXT_B: 2000, "nvidia.com/gpumem": 8_000_000, "cpu": 20}
    assert fit_failures(request, node_alloc(), {}, 0, ignored={EXT_B, "nvidia.com/gpumem", "cpu"}) == [
        "Insufficient cpu"
    ]


@pytest.mark.parametrize(
    ("allocatable_pods", "pod_count", "request_", "reasons"),
    [
        # kube's TestNotEnoughRequests: a node full of pods refuses even a pod that asks for nothing
        (1, 1, {}, ["Too many pods"]),
        (1, 1, res(1, 1), ["Too many pods"]),
        (1, 1, res(20, 1), ["Too many pods", "Insufficient cpu"]),
        (2, 1, {}, []),
        (None, 0, {}, ["Too many pods"]),  # a node that reports no pods takes none
    ],
)
def test_too_many_pods(
    allocatable_pods: int | None, pod_count: int, request_: dict[str, int], reasons: list[str]
) -> None:
    allocatable = res(10, 20)
    if allocatable_pods is not None:
        allocatable["pods"] = allocatable_pods * 1000
    assert fit_failures(request_, allocatable, {}, pod_count) == reasons


@pytest.mark.parametrize(
    ("requested_pods", "pod_count", "reasons"),
    [
        # a snapshot may say how full a node is by `requested.pods` alone: full is full
        (32, 0, ["Too many pods"]),
        (31, 0, []),
        (33, 0, ["Too many pods"]),
        # the larger of the two counts
        (2, 32, ["Too many pods"]),
        (31, 5, []),
    ],
)
def test_too_many_pods_counts_requested_pods(requested_pods: int, pod_count: int, reasons: list[str]) -> None:
    requested = {"pods": requested_pods * 1000}
    assert fit_failures({}, node_alloc(), requested, pod_count) == reasons


@pytest.mark.parametrize(
    ("containers", "inits", "overhead", "expected"),
    [
        ([res(1000)], [], None, res(1000)),
        ([res(1000, 5), res(500, 5)], [], None, res(1500, 10)),
        # an ordinary init container raises the request only when it is larger
        ([res(1000)], [InitContainerRequest(requests=res(3000))], None, res(3000)),
        # a sidecar (restartable init container) adds to the containers
        ([res(2000)], [InitContainerRequest(requests=res(1000), restartable=True)], None, res(3000)),
        # an init container after a sidecar needs its own request plus the sidecar's
        (
            [res(1000)],
            [InitContainerRequest(requests=res(1000), restartable=True), InitContainerRequest(requests=res(2000))],
            None,
            res(3000),
        ),
        # ... but not when it runs before the sidecar starts
        (
            [res(1000)],
            [InitContainerRequest(requests=res(5000)), InitContainerRequest(requests=res(1000), restartable=True)],
            None,
            res(5000),
        ),
        # several sidecars accumulate
        (
            [res(1000)],
            [
                InitContainerRequest(requests=res(1000), restartable=True),
                InitContainerRequest(requests=res(1000), restartable=True),
                InitContainerRequest(requests=res(2500)),
            ],
            None,
            res(4500),
        ),
        # overhead is added after the max
        ([res(1000, 1)], [InitContainerRequest(requests=res(3000))], res(250, 2), res(3250, 3)),
        # resources only an init container asks for still count
        ([res(1000)], [InitContainerRequest(requests={EXT_A: 2000})], None, {**res(1000), EXT_A: 2000}),
    ],
)
def test_effective_pod_request(
    containers: list[dict[str, int]],
    inits: list[InitContainerRequest],
    overhead: dict[str, int] | None,
    expected: dict[str, int],
) -> None:
    assert effective_pod_request(containers, inits, overhead) == expected


def test_parse_requests_rounds_like_kube() -> None:
    parsed = parse_requests(
        {"cpu": "1.5", "memory": "1.5", "nvidia.com/gpu": "2", "ephemeral-storage": "1Ki"}, "requests"
    )
    assert parsed == {"cpu": 1500, "memory": 2000, "nvidia.com/gpu": 2000, "ephemeral-storage": 1024_000}
    assert parse_requests({"cpu": "0.1m"}, "requests") == {"cpu": 1}  # MilliValue rounds up


@pytest.mark.parametrize(
    ("mapping", "field", "reason"),
    [
        ({"cpu": "lots"}, "requests.cpu", "'lots' is not a Kubernetes quantity"),
        ({"memory": "-1Gi"}, "requests.memory", "must not be negative"),
        ({"example.com/x": "1e30"}, "requests.example.com/x", "64 bits"),
    ],
)
def test_parse_requests_names_the_field(mapping: dict[str, str], field: str, reason: str) -> None:
    with pytest.raises(RequestError, match=reason) as caught:
        parse_requests(mapping, "requests")
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("name", "scalar"),
    [
        ("nvidia.com/gpu", True),
        ("hugepages-1Gi", True),
        ("kubernetes.io/batch-cpu", True),
        ("attachable-volumes-csi-x", True),
        ("cpu", False),
        ("foo", False),
        ("requests.example.com/x", False),
    ],
)
def test_scalar_resources(name: str, scalar: bool) -> None:
    assert is_scalar_resource(name) is scalar
