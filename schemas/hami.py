"""HAMi's annotations, written and read in HAMi's own formats (HAMi v2.7 - v2.10).

Pod, as HAMi's scheduler writes them (its device plugin reads them in Allocate):
- `hami.io/vgpu-node`: the node; `hami.io/vgpu-time`: unix seconds of the decision.
- `hami.io/vgpu-devices-to-allocate` and `hami.io/vgpu-devices-allocated` (the same
  string): per device `UUID,Type,memMiB,cores:`, each container's list closed by `;`,
  e.g. `GPU-0a1b...,NVIDIA,4000,30:;`. Type is HAMi's device type (`NVIDIA`), memory in
  MiB, cores in percent of the GPU's SMs.
- at bind: `hami.io/bind-phase: allocating`, `hami.io/bind-time: <unix seconds>`.

Node:
- `hami.io/mutex.lock`: `<RFC3339 time>,<namespace>,<pod>`, the node lock HAMi's
  scheduler takes before binding and its device plugin releases in Allocate; a lock
  older than HAMi's timeout (5 minutes, HAMI_NODELOCK_EXPIRE) counts as expired.
- `hami.io/device-cordon`: comma-separated GPU UUIDs taken out of new allocations.

Pod, read: `hami.io/device-scoring-weights`: `slot=<int>,core=<int>,memory=<int>`, the
weights of HAMi's per-device usage score (default 1 each).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping

import msgspec

from schemas.vendors import NVIDIA

VGPU_NODE = "hami.io/vgpu-node"
VGPU_TIME = "hami.io/vgpu-time"
DEVICES_TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
DEVICES_ALLOCATED = "hami.io/vgpu-devices-allocated"
BIND_PHASE = "hami.io/bind-phase"
BIND_TIME = "hami.io/bind-time"
BIND_ALLOCATING = "allocating"
NODE_LOCK = "hami.io/mutex.lock"
DEVICE_CORDON = "hami.io/device-cordon"
SCORING_WEIGHTS = "hami.io/device-scoring-weights"

NVIDIA_TYPE = NVIDIA.hami_types[0]  # HAMi's device type for NVIDIA GPUs (nvidia.NvidiaGPUDevice)
FULL_CORES = 100  # HAMi's util.DeviceLimit: cores are a percentage
NODE_LOCK_TIMEOUT_SECONDS = 300.0  # HAMi's nodelock.NodeLockTimeout default (5 minutes)

_DEVICE_SEP = ":"  # after each device of a container
_CONTAINER_SEP = ";"  # after each container's list


class HamiDevice(msgspec.Struct, frozen=True, kw_only=True):
    """One GPU of a container as HAMi's ContainerDevice encodes it."""

    uuid: str
    type: str = NVIDIA_TYPE
    memory_mib: int
    cores: int


class NodeLock(msgspec.Struct, frozen=True, kw_only=True):
    """The value of `hami.io/mutex.lock`: when it was taken and by which pod."""

    taken_at: float  # unix seconds
    namespace: str = ""
    name: str = ""

    def held_by(self, namespace: str, name: str) -> bool:
        return (self.namespace, self.name) == (namespace, name)

    def expired(self, now: float, timeout: float = NODE_LOCK_TIMEOUT_SECONDS) -> bool:
        return now - self.taken_at > timeout


class ScoringWeights(msgspec.Struct, frozen=True, kw_only=True):
    slot: int = 1
    core: int = 1
    memory: int = 1


DEFAULT_WEIGHTS = ScoringWeights()


def _check_field(value: str, what: str) -> None:
    for bad in (",", _DEVICE_SEP, _CONTAINER_SEP):
        if bad in value:
            raise ValueError(f"{what}: {value!r} contains {bad!r}, which HAMi's format cannot carry")


def encode_container_devices(devices: Iterable[HamiDevice]) -> str:
    parts = []
    for d in devices:
        _check_field(d.uuid, "uuid")
        _check_field(d.type, "type")
        parts.append(f"{d.uuid},{d.type},{d.memory_mib},{d.cores}{_DEVICE_SEP}")
    return "".join(parts)


def encode_pod_devices(containers: Iterable[Iterable[HamiDevice]]) -> str:
    """HAMi's EncodePodSingleDevice: each container's devices, each list closed by `;`."""
    return "".join(encode_container_devices(c) + _CONTAINER_SEP for c in containers)


def decode_pod_devices(value: str) -> tuple[tuple[HamiDevice, ...], ...]:
    """The containers' device lists that hold devices (HAMi skips empty ones); raises ValueError."""
    containers: list[tuple[HamiDevice, ...]] = []
    for chunk in value.split(_CONTAINER_SEP):
        devices = []
        for item in chunk.split(_DEVICE_SEP):
            if not item:
                continue
            fields = item.split(",")
            if len(fields) < 4:
                raise ValueError(f"HAMi device {item!r}: expected UUID,Type,memMiB,cores")
            try:
                devices.append(
                    HamiDevice(uuid=fields[0], type=fields[1], memory_mib=int(fields[2]), cores=int(fields[3]))
                )
            except ValueError:
                raise ValueError(f"HAMi device {item!r}: memory and cores must be integers") from None
        if devices:
            containers.append(tuple(devices))
    return tuple(containers)


def pod_annotations(node: str, containers: Iterable[Iterable[HamiDevice]], now: float) -> dict[str, str]:
    """What HAMi's scheduler writes on a pod (filter, then bind), for one node and these devices."""
    encoded = encode_pod_devices(containers)
    stamp = str(int(now))
    return {
        VGPU_NODE: node,
        VGPU_TIME: stamp,
        DEVICES_TO_ALLOCATE: encoded,
        DEVICES_ALLOCATED: encoded,
        BIND_PHASE: BIND_ALLOCATING,
        BIND_TIME: stamp,
    }


def format_node_lock(now: float, namespace: str, name: str) -> str:
    """`<RFC3339>,<namespace>,<pod>` in UTC, whole seconds (Go's time.RFC3339)."""
    stamp = dt.datetime.fromtimestamp(int(now), tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{stamp},{namespace},{name}"


def parse_node_lock(value: str) -> NodeLock:
    """A lock value: `<RFC3339>` alone (older HAMi) or `<RFC3339>,<ns>,<pod>`; raises ValueError."""
    parts = value.split(",")
    if len(parts) not in (1, 3):
        raise ValueError(f"{NODE_LOCK}: expected <time>,<namespace>,<pod>, got {value!r}")
    try:
        taken = dt.datetime.fromisoformat(parts[0].strip())
    except ValueError:
        raise ValueError(f"{NODE_LOCK}: {parts[0]!r} is not an RFC 3339 time") from None
    if taken.tzinfo is None:
        raise ValueError(f"{NODE_LOCK}: {parts[0]!r} has no time zone")
    if len(parts) == 1:
        return NodeLock(taken_at=taken.timestamp())
    return NodeLock(taken_at=taken.timestamp(), namespace=parts[1], name=parts[2])


def cordoned_uuids(annotations: Mapping[str, str]) -> frozenset[str]:
    """GPU UUIDs listed in the node's `hami.io/device-cordon` (blank entries ignored)."""
    raw = annotations.get(DEVICE_CORDON, "")
    return frozenset(u.strip() for u in raw.split(",") if u.strip())


INDEX_PREFIX = "index:"  # a cordoned device named by its index, once its UUID is hidden (engine device classes)


def cordon_by_index(annotations: Mapping[str, str], devices: Iterable[tuple[int, str]]) -> str | None:
    """The cordon annotation with the node's own UUIDs turned into `index:<i>` (others dropped).

    Nodes are grouped into classes without their UUIDs; written by index, the cordon still
    tells the class which devices are out. None when the node has no cordon annotation."""
    if DEVICE_CORDON not in annotations:
        return None
    listed = cordoned_uuids(annotations)
    return ",".join(f"{INDEX_PREFIX}{index}" for index, uuid in sorted(devices) if uuid in listed)


def is_cordoned(annotations: Mapping[str, str], index: int, uuid: str) -> bool:
    listed = cordoned_uuids(annotations)
    return (bool(uuid) and uuid in listed) or f"{INDEX_PREFIX}{index}" in listed


def parse_scoring_weights(value: str) -> ScoringWeights:
    """`slot=<int>,core=<int>,memory=<int>`: all three, non-negative, one positive; raises ValueError."""
    parts = value.split(",")
    if len(parts) != 3:
        raise ValueError(f"{SCORING_WEIGHTS}: expected slot, core and memory weights, got {value!r}")
    weights: dict[str, int] = {}
    for part in parts:
        key, eq, number = part.strip().partition("=")
        key = key.strip()
        if not eq:
            raise ValueError(f"{SCORING_WEIGHTS}: expected key=value entries, got {value!r}")
        if key not in ("slot", "core", "memory"):
            raise ValueError(f"{SCORING_WEIGHTS}: unknown weight {key!r} (allowed: slot, core, memory)")
        if key in weights:
            raise ValueError(f"{SCORING_WEIGHTS}: duplicate {key!r} weight")
        try:
            weight = int(number.strip())
        except ValueError:
            raise ValueError(f"{SCORING_WEIGHTS}: {key!r} weight must be an integer, got {number.strip()!r}") from None
        if weight < 0:
            raise ValueError(f"{SCORING_WEIGHTS}: {key!r} weight must not be negative")
        weights[key] = weight
    if not any(weights.values()):
        raise ValueError(f"{SCORING_WEIGHTS}: at least one weight must be positive")
    return ScoringWeights(**weights)
