"""Every share the engine hands out is one the binder accepts (schemas.shares is the one definition)."""

from __future__ import annotations

import random

import pytest
from engine_builders import gpu, node, snapshot
from random_clusters import random_cluster, random_pod

from engine import Mode, PodRequest, RequestError, place
from schemas.shares import share_problem

MODES = pytest.mark.parametrize("mode", [Mode.DEFAULT, Mode.HAMI])

MEMORY_ONLY = (
    {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"},
    {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "25"},
    {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "4000", "nvidia.com/gpucores": "0"},
)


@MODES
@pytest.mark.parametrize("requests", MEMORY_ONLY)
def test_memory_only_requests_place_as_valid_shares(requests: dict[str, str], mode: Mode) -> None:
    decision = place(snapshot(node("n1", [gpu(0), gpu(1)])), PodRequest(uid="p", requests=requests), mode)
    assert decision.node == "n1", decision.reason
    assert [d.cores for d in decision.devices] == [0] * int(requests["nvidia.com/gpu"])
    assert [share_problem(d, i) for i, d in enumerate(decision.devices)] == [None] * len(decision.devices)


@MODES
@pytest.mark.parametrize("seed", range(4))
def test_every_share_the_engine_emits_is_valid(seed: int, mode: Mode) -> None:
    rng = random.Random(seed)
    snap = random_cluster(rng, 20)
    placed = 0
    for j in range(40):
        try:
            decision = place(snap, random_pod(rng, f"pod-{j}"), mode)
        except RequestError:
            continue  # the random mix also draws requests the vendor refuses to read
        placed += decision.node is not None
        for position, share in enumerate(decision.devices):
            assert share_problem(share, position) is None, (decision.node, share)
    assert placed > 0, "the sample should place some pods"
