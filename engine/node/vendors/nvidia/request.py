"""NVIDIA requests: HAMi's resources and annotations read strictly into an NvidiaRequest.

Resources: nvidia.com/gpu (count), nvidia.com/gpumem (MiB per GPU),
nvidia.com/gpumem-percentage, nvidia.com/gpucores (percent per GPU).
A count alone takes whole GPUs (an idle GPU each). A memory or cores share
lets a GPU hold several pods while memory and cores fit (at most
DEVICE_SPLIT_COUNT pods, HAMi's default deviceSplitCount).

Annotations: hami.io/gpu-scheduler-policy (binpack | spread | topology-aware |
mutex | numa, or a comma list; default spread), hami.io/node-scheduler-policy
(a registered node policy, engine/node/policies/; default binpack), nvidia.com/use-gpuuuid,
nvidia.com/nouse-gpuuuid, nvidia.com/use-gputype, nvidia.com/nouse-gputype
(comma lists), nvidia.com/numa-bind (true: all GPUs on one NUMA node),
hami.io/device-scoring-weights (`slot=1,core=1,memory=1`: the weights of HAMi's
per-device usage score, hami mode).

Node annotation: hami.io/device-cordon (comma-separated GPU UUIDs an operator took
out of new allocations), honoured in every mode.
"""

from __future__ import annotations

import enum

from engine.core.model import PodRequest
from engine.core.quantities import optional_int, parse_bool, split_list
from engine.node.vendor import DeviceRequest, RequestError, node_policy_name
from schemas import hami
from schemas.events import DeviceAssignment
from schemas.topology import Device, Vendor
from schemas.vendors import NVIDIA

GPU = NVIDIA.whole


GPUMEM = NVIDIA.memory_share


GPUMEM_PERCENTAGE = NVIDIA.memory_percent_share


GPUCORES = NVIDIA.compute_share


GPU_POLICY = "hami.io/gpu-scheduler-policy"


USE_UUID = "nvidia.com/use-gpuuuid"


NOUSE_UUID = "nvidia.com/nouse-gpuuuid"


USE_TYPE = "nvidia.com/use-gputype"


NOUSE_TYPE = "nvidia.com/nouse-gputype"


NUMA_BIND = "nvidia.com/numa-bind"


DEVICE_SPLIT_COUNT = 10  # pods per GPU, HAMi's default deviceSplitCount


class GpuPolicy(enum.StrEnum):
    BINPACK = "binpack"
    SPREAD = "spread"
    TOPOLOGY = "topology-aware"
    MUTEX = "mutex"
    NUMA = "numa"


class NvidiaRequest(DeviceRequest, frozen=True, kw_only=True):
    whole: bool  # no memory / cores share: whole, idle GPUs
    memory_mib: int = 0  # per GPU; 0 = not given
    memory_percent: int = 0  # per GPU; 0 = not given (100 when neither is given)
    cores: int = 100
    policies: tuple[GpuPolicy, ...] = (GpuPolicy.SPREAD,)
    use_uuids: tuple[str, ...] = ()
    nouse_uuids: tuple[str, ...] = ()
    use_types: tuple[str, ...] = ()
    nouse_types: tuple[str, ...] = ()
    numa_bind: bool = False
    weights: hami.ScoringWeights = hami.DEFAULT_WEIGHTS  # hami.io/device-scoring-weights

    @property
    def reads_uuids(self) -> bool:
        return bool(self.use_uuids or self.nouse_uuids)

    @property
    def binpack(self) -> bool:
        return GpuPolicy.BINPACK in self.policies

    @property
    def topology(self) -> bool:
        return GpuPolicy.TOPOLOGY in self.policies

    @property
    def mutex(self) -> bool:
        return GpuPolicy.MUTEX in self.policies

    def memory_for(self, device: Device) -> int:
        """MiB this request takes on `device`."""
        if self.whole:
            return device.memory_mib
        if self.memory_mib > 0:
            return self.memory_mib
        return device.memory_mib * (self.memory_percent or 100) // 100


def gpu_policies(text: str | None) -> tuple[GpuPolicy, ...]:
    if text is None:
        return (GpuPolicy.SPREAD,)
    names = split_list(text)
    if not names:
        raise RequestError(GPU_POLICY, "is empty")
    policies: list[GpuPolicy] = []
    for name in names:
        try:
            policies.append(GpuPolicy(name))
        except ValueError:
            allowed = ", ".join(p.value for p in GpuPolicy)
            raise RequestError(GPU_POLICY, f"unknown policy {name!r} (allowed: {allowed})") from None
    if GpuPolicy.BINPACK in policies and GpuPolicy.SPREAD in policies:
        raise RequestError(GPU_POLICY, "binpack and spread exclude each other")
    return tuple(policies)


def scoring_weights(text: str | None) -> hami.ScoringWeights:
    if text is None:
        return hami.DEFAULT_WEIGHTS
    try:
        return hami.parse_scoring_weights(text)
    except ValueError as exc:
        raise RequestError(hami.SCORING_WEIGHTS, str(exc).removeprefix(f"{hami.SCORING_WEIGHTS}: ")) from None


def parse_nvidia_request(request: PodRequest) -> NvidiaRequest | None:
    """The pod's NVIDIA request (None: it asks for no GPU); RequestError names a bad resource or annotation."""
    res = request.requests
    count = optional_int(res, GPU, low=0)
    memory = optional_int(res, GPUMEM, low=1)
    percent = optional_int(res, GPUMEM_PERCENTAGE, low=1, high=100)
    cores = optional_int(res, GPUCORES, low=0, high=100)
    if count is None:
        if memory is not None or percent is not None or cores is not None:
            raise RequestError(GPU, "is required with nvidia.com/gpumem, gpumem-percentage or gpucores")
        return None
    if count == 0:
        return None
    if memory is not None and percent is not None:
        raise RequestError(GPUMEM_PERCENTAGE, "cannot be combined with nvidia.com/gpumem")
    ann = request.annotations
    policies = gpu_policies(ann.get(GPU_POLICY))
    numa = GpuPolicy.NUMA in policies or (NUMA_BIND in ann and parse_bool(NUMA_BIND, ann[NUMA_BIND]))
    whole = memory is None and percent is None and cores is None
    return NvidiaRequest(
        vendor=Vendor.NVIDIA,
        resource=GPU,
        count=count,
        node_policy=node_policy_name(ann),
        device_noun=NVIDIA.device_noun,
        whole=whole,
        memory_mib=memory or 0,
        memory_percent=percent or 0,
        cores=100 if whole else (cores if cores is not None else 0),
        policies=policies,
        use_uuids=split_list(ann.get(USE_UUID, "")),
        nouse_uuids=split_list(ann.get(NOUSE_UUID, "")),
        use_types=split_list(ann.get(USE_TYPE, "")),
        nouse_types=split_list(ann.get(NOUSE_TYPE, "")),
        numa_bind=numa,
        weights=scoring_weights(ann.get(hami.SCORING_WEIGHTS)),
    )


def host_request(request: PodRequest) -> NvidiaRequest:
    """A pod without GPUs, as a policy that scores such pods reads it: how its CPU changes the GPUs' use."""
    return NvidiaRequest(
        vendor=Vendor.NVIDIA, resource=GPU, count=0, node_policy=node_policy_name(request.annotations), whole=True
    )


def type_mismatch(request: NvidiaRequest, device: Device) -> str:
    model = device.model.upper()
    if request.use_types and not any(t.upper() in model for t in request.use_types):
        return f"type {device.model!r} not in {USE_TYPE}"
    if any(t.upper() in model for t in request.nouse_types):
        return f"type {device.model!r} excluded by {NOUSE_TYPE}"
    return ""


def assignment_of(request: NvidiaRequest, device: Device) -> DeviceAssignment:
    if request.whole:
        return DeviceAssignment(index=device.index, uuid=device.uuid, memory_mib=0, cores=100)
    return DeviceAssignment(
        index=device.index, uuid=device.uuid, memory_mib=request.memory_for(device), cores=request.cores
    )
