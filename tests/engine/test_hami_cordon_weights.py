"""hami.io/device-cordon (every mode) and hami.io/device-scoring-weights (hami mode)."""

from __future__ import annotations

import msgspec
import pytest
from engine_builders import gpu, indices, node, place, pod, snapshot

from engine import Allocation, Mode, RequestError
from schemas import hami

CORDON_REASON = "cordoned by hami.io/device-cordon"


def cordoned(state_uuids: str, n: int = 2) -> object:
    built = node("n1", [gpu(i) for i in range(n)])
    return msgspec.structs.replace(built, annotations={hami.DEVICE_CORDON: state_uuids})


@pytest.mark.parametrize("mode", list(Mode))
def test_cordoned_devices_are_never_chosen(mode: Mode) -> None:
    decision = place(snapshot(cordoned("GPU-0000")), pod(1), mode)  # type: ignore[arg-type]
    assert decision.node == "n1" and indices(decision.devices) == [1]


@pytest.mark.parametrize("mode", list(Mode))
def test_a_node_with_every_gpu_cordoned_says_why(mode: Mode) -> None:
    decision = place(snapshot(cordoned(" GPU-0000 , GPU-0001,")), pod(1), mode)  # type: ignore[arg-type]
    assert decision.node is None
    assert [v.node for v in decision.alternatives] == ["n1"]
    assert CORDON_REASON in decision.alternatives[0].reason


def test_cordon_annotation_parsing() -> None:
    assert hami.cordoned_uuids({hami.DEVICE_CORDON: "GPU-a, ,GPU-b,"}) == {"GPU-a", "GPU-b"}
    assert hami.cordoned_uuids({}) == frozenset()


def two_used_gpus() -> object:
    # GPU 0: much memory, few cores used; GPU 1: little memory, many cores used
    return node(
        "n1",
        [gpu(0, memory=10_000), gpu(1, memory=10_000)],
        allocations=[
            Allocation(pod_uid="a", index=0, memory_mib=8_000, cores=10),
            Allocation(pod_uid="b", index=1, memory_mib=1_000, cores=70),
        ],
    )


@pytest.mark.parametrize(
    ("weights", "chosen"),
    [("slot=0,core=0,memory=1", 1), ("slot=0,core=1,memory=0", 0), ("slot=1, core=5 ,memory=1", 0)],
)
def test_scoring_weights_steer_hamis_spread(weights: str, chosen: int) -> None:
    request = pod(1, gpumem="1000", gpucores="5", annotations={hami.SCORING_WEIGHTS: weights})
    decision = place(snapshot(two_used_gpus()), request, Mode.HAMI)  # type: ignore[arg-type]
    assert indices(decision.devices) == [chosen]  # spread: the least used by the weighted score


def test_default_weights_are_hamis_plain_score() -> None:
    plain = place(snapshot(two_used_gpus()), pod(1, gpumem="1000", gpucores="5"), Mode.HAMI)  # type: ignore[arg-type]
    weighted = place(
        snapshot(two_used_gpus()),  # type: ignore[arg-type]
        pod(1, gpumem="1000", gpucores="5", annotations={hami.SCORING_WEIGHTS: "slot=1,core=1,memory=1"}),
        Mode.HAMI,
    )
    assert indices(plain.devices) == indices(weighted.devices) == [1]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("slot=1,core=1", "expected slot, core and memory weights"),
        ("slot=1,core=1,gpu=1", "unknown weight 'gpu'"),
        ("slot=1,slot=1,core=1", "duplicate 'slot'"),
        ("slot=-1,core=1,memory=1", "must not be negative"),
        ("slot=x,core=1,memory=1", "must be an integer"),
        ("slot=0,core=0,memory=0", "at least one weight must be positive"),
        ("slot,core=1,memory=1", "key=value"),
    ],
)
def test_bad_weights_are_refused_naming_the_annotation(value: str, reason: str) -> None:
    with pytest.raises(RequestError) as caught:
        place(snapshot(two_used_gpus()), pod(1, annotations={hami.SCORING_WEIGHTS: value}), Mode.HAMI)  # type: ignore[arg-type]
    assert hami.SCORING_WEIGHTS in str(caught.value) and reason in str(caught.value)


@pytest.mark.parametrize("mode", list(Mode))
def test_a_cordon_names_its_own_nodes_devices_only(mode: Mode) -> None:
    # Twin nodes share a device class; the cordon lists node a's GPU 0 (and b's UUID scheme differs).
    a = msgspec.structs.replace(
        node("a", [gpu(0, uuid="GPU-a0"), gpu(1, uuid="GPU-a1")]), annotations={hami.DEVICE_CORDON: "GPU-a0,GPU-a1"}
    )
    b = msgspec.structs.replace(
        node("b", [gpu(0, uuid="GPU-b0"), gpu(1, uuid="GPU-b1")]), annotations={hami.DEVICE_CORDON: "GPU-a0,GPU-a1"}
    )
    decision = place(snapshot(a, b), pod(2), mode)
    assert decision.node == "b" and sorted(indices(decision.devices)) == [0, 1]
    assert CORDON_REASON in decision.alternatives[0].reason
