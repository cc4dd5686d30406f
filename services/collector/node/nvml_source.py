"""Read a node's NVIDIA GPUs through NVML: devices, the link between every pair, usage and health.

Every NVML call is guarded on its own: a device that fails a query is
reported unhealthy with the reason, and the read goes on. Only a missing or
broken NVML library (no driver) stops the read, with NvmlUnavailableError.

The `nvml` parameter is the pynvml module (package nvidia-ml-py); tests pass a
fake with the same functions and exception classes.
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import Any

import msgspec

from schemas.events import DeviceUsage
from schemas.topology import Device, Link, NodeTopology, PcieLevel, Vendor

MIB = 1024 * 1024

# NVML topology levels (nvmlGpuTopologyLevel_t) -> the names `nvidia-smi topo -m` prints.
_TOPOLOGY_LEVELS: dict[int, PcieLevel] = {
    0: PcieLevel.SAME_BOARD,  # NVML_TOPOLOGY_INTERNAL
    10: PcieLevel.PIX,  # NVML_TOPOLOGY_SINGLE
    20: PcieLevel.PXB,  # NVML_TOPOLOGY_MULTIPLE
    30: PcieLevel.PHB,  # NVML_TOPOLOGY_HOSTBRIDGE
    40: PcieLevel.NODE,  # NVML_TOPOLOGY_NODE
    50: PcieLevel.SYS,  # NVML_TOPOLOGY_SYSTEM
}
_BUS_ID = re.compile(r"^(?:([0-9a-fA-F]+):)?([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-9a-fA-F]+)$")


class NvmlUnavailableError(RuntimeError):
    """NVML cannot be used on this machine (no driver, no library, or it failed to initialise)."""


class DeviceProblem(msgspec.Struct, frozen=True, kw_only=True):
    """Why a device is reported unhealthy or a value is missing: the NVML call and its error."""

    index: int
    call: str
    reason: str


class NodeReading(msgspec.Struct, frozen=True, kw_only=True):
    """One look at a node: its topology, its usage, and what went wrong on the way."""

    topology: NodeTopology
    usage: tuple[DeviceUsage, ...]
    problems: tuple[DeviceProblem, ...] = ()


class _Gpu(msgspec.Struct, kw_only=True):
    """What one read learned about one GPU (mutable while the read goes on)."""

    index: int
    handle: Any = None
    uuid: str = ""
    model: str = "unknown"
    memory_mib: int = 0
    memory_used_mib: int = 0
    utilization_pct: int = 0
    bus_id: tuple[int, int, int, int] | None = None
    numa_node: int | None = None
    cpu_affinity: tuple[int, ...] = ()
    nvlinks_to_bus: dict[tuple[int, int, int, int], int] = {}
    nvswitch_links: int = 0
    healthy: bool = True


def read_node(node: str, *, nvml: Any = None) -> NodeReading:
    """Initialise NVML, read every GPU and every pair, shut NVML down."""
    lib = nvml if nvml is not None else _import_pynvml()
    try:
        lib.nvmlInit()
    except lib.NVMLError as exc:
        raise NvmlUnavailableError(
            f"NVML could not be initialised: {_reason(exc)} (is the NVIDIA driver installed?)"
        ) from exc
    try:
        return _read(node, lib)
    finally:
        with contextlib.suppress(lib.NVMLError):  # nothing left to release that a failed shutdown would keep
            lib.nvmlShutdown()


def _import_pynvml() -> Any:  # pynvml ships no type hints
    try:
        import pynvml
    except ImportError as exc:
        raise NvmlUnavailableError("the nvidia-ml-py package (module pynvml) is not installed") from exc
    return pynvml


class _Reader:
    """One read: collects problems as it goes instead of raising."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self.problems: list[DeviceProblem] = []

    def call(self, gpu: _Gpu, name: str, *args: Any, essential: bool = True) -> Any:
        """Call lib.<name>(*args); on NVMLError record it (essential calls mark the GPU unhealthy) and return None."""
        try:
            return getattr(self.lib, name)(*args)
        except self.lib.NVMLError as exc:
            if _is_not_supported(self.lib, exc) and not essential:
                return None
            self.problems.append(DeviceProblem(index=gpu.index, call=name, reason=_reason(exc)))
            if essential:
                gpu.healthy = False
            return None


def _read(node: str, lib: Any) -> NodeReading:
    try:
        count = int(lib.nvmlDeviceGetCount())
    except lib.NVMLError as exc:
        raise NvmlUnavailableError(f"nvmlDeviceGetCount failed: {_reason(exc)}") from exc
    reader = _Reader(lib)
    gpus = [_read_device(reader, index) for index in range(count)]
    _fill_numa_from_cpu_affinity(gpus)
    for gpu in gpus:
        _read_nvlinks(reader, gpu)
    links = _pair_links(reader, gpus)
    model = gpus[0].model if gpus else "none"
    topology = NodeTopology(
        node=node,
        machine_type=_machine_type(count, model),
        devices=tuple(
            Device(
                index=g.index,
                uuid=g.uuid,
                vendor=Vendor.NVIDIA,
                model=g.model,
                memory_mib=g.memory_mib,
                numa_node=g.numa_node,
                nvswitch_links=g.nvswitch_links,
                healthy=g.healthy,
            )
            for g in gpus
        ),
        links=links,
        source="nvml",
    )
    usage = tuple(
        DeviceUsage(
            index=g.index, memory_used_mib=g.memory_used_mib, utilization_pct=g.utilization_pct, healthy=g.healthy
        )
        for g in gpus
    )
    return NodeReading(topology=topology, usage=usage, problems=tuple(reader.problems))


def _read_device(reader: _Reader, index: int) -> _Gpu:
    gpu = _Gpu(index=index)
    gpu.handle = reader.call(gpu, "nvmlDeviceGetHandleByIndex", index)
    if gpu.handle is None:
        return gpu  # nothing else can be asked of it
    handle, lib = gpu.handle, reader.lib
    gpu.uuid = _text(reader.call(gpu, "nvmlDeviceGetUUID", handle)) or f"unknown-{index}"
    gpu.model = _text(reader.call(gpu, "nvmlDeviceGetName", handle)) or "unknown"
    memory = reader.call(gpu, "nvmlDeviceGetMemoryInfo", handle)
    if memory is not None:
        gpu.memory_mib = int(memory.total) // MIB
        gpu.memory_used_mib = int(memory.used) // MIB
    pci = reader.call(gpu, "nvmlDeviceGetPciInfo", handle)
    if pci is not None:
        gpu.bus_id = parse_bus_id(_text(pci.busId))
    utilization = reader.call(gpu, "nvmlDeviceGetUtilizationRates", handle, essential=False)
    if utilization is not None:
        gpu.utilization_pct = int(utilization.gpu)
    numa = (
        reader.call(gpu, "nvmlDeviceGetNumaNodeId", handle, essential=False)
        if hasattr(lib, "nvmlDeviceGetNumaNodeId")
        else None
    )
    if numa is not None and int(numa) >= 0:
        gpu.numa_node = int(numa)
    else:
        words = max(1, ((os.cpu_count() or 64) + 63) // 64)
        mask = reader.call(gpu, "nvmlDeviceGetCpuAffinity", handle, words, essential=False)
        gpu.cpu_affinity = tuple(int(w) for w in mask) if mask is not None else ()
    pending = reader.call(gpu, "nvmlDeviceGetRetiredPagesPendingStatus", handle, essential=False)
    if pending is not None and int(pending) == int(lib.NVML_FEATURE_ENABLED):
        gpu.healthy = False
        reader.problems.append(
            DeviceProblem(
                index=index,
                call="nvmlDeviceGetRetiredPagesPendingStatus",
                reason="retired memory pages pending: reset the GPU",
            )
        )
    return gpu


def _fill_numa_from_cpu_affinity(gpus: list[_Gpu]) -> None:
    """Where NVML gives no NUMA node, number the distinct CPU affinity sets by their lowest CPU."""
    masks = {g.cpu_affinity for g in gpus if g.numa_node is None and any(g.cpu_affinity)}
    ordered = sorted(masks, key=_lowest_cpu)
    for gpu in gpus:
        if gpu.numa_node is None and gpu.cpu_affinity in masks:
            gpu.numa_node = ordered.index(gpu.cpu_affinity)


def _lowest_cpu(mask: tuple[int, ...]) -> int:
    for word_index, word in enumerate(mask):
        if word:
            return word_index * 64 + ((word & -word).bit_length() - 1)
    return 1 << 30


def _read_nvlinks(reader: _Reader, gpu: _Gpu) -> None:
    """Count gpu's active NVLinks per remote PCI device; links into an NVSwitch separately."""
    if gpu.handle is None:
        return
    lib = reader.lib
    counts: dict[tuple[int, int, int, int], int] = {}
    for link in range(int(getattr(lib, "NVML_NVLINK_MAX_LINKS", 18))):
        try:
            state = lib.nvmlDeviceGetNvLinkState(gpu.handle, link)
        except lib.NVMLError:
            # Not supported (a PCIe GPU) or past this GPU's last link: no more links to read.
            break
        if int(state) != int(lib.NVML_FEATURE_ENABLED):
            continue
        remote = reader.call(gpu, "nvmlDeviceGetNvLinkRemotePciInfo", gpu.handle, link, essential=False)
        if remote is None:
            continue
        kind = _remote_kind(lib, gpu.handle, link)
        if kind == "switch":
            gpu.nvswitch_links += 1
            continue
        if kind == "cpu":
            continue  # an NVLink to the CPU (IBM POWER): not a GPU pair
        bus = parse_bus_id(_text(remote.busId))
        if bus is not None:
            counts[bus] = counts.get(bus, 0) + 1
    gpu.nvlinks_to_bus = counts


def _remote_kind(lib: Any, handle: Any, link: int) -> str:
    """ "gpu", "switch", "cpu", or "unknown" (drivers before R450 cannot tell)."""
    if not hasattr(lib, "nvmlDeviceGetNvLinkRemoteDeviceType"):
        return "unknown"
    try:
        kind = int(lib.nvmlDeviceGetNvLinkRemoteDeviceType(handle, link))
    except lib.NVMLError:
        return "unknown"
    kinds = {
        int(getattr(lib, "NVML_NVLINK_DEVICE_TYPE_GPU", 0)): "gpu",
        int(getattr(lib, "NVML_NVLINK_DEVICE_TYPE_IBMNPU", 1)): "cpu",
        int(getattr(lib, "NVML_NVLINK_DEVICE_TYPE_SWITCH", 2)): "switch",
    }
    return kinds.get(kind, "unknown")


def _pair_links(reader: _Reader, gpus: list[_Gpu]) -> tuple[Link, ...]:
    by_bus = {g.bus_id: g for g in gpus if g.bus_id is not None}
    # A link whose far end is not a GPU of this node goes to an NVSwitch port
    # (drivers that cannot tell the remote type report only its bus id).
    for gpu in gpus:
        for bus, count in list(gpu.nvlinks_to_bus.items()):
            if bus not in by_bus:
                gpu.nvswitch_links += count
                del gpu.nvlinks_to_bus[bus]
    links: list[Link] = []
    for a in gpus:
        for b in gpus:
            if a.index == b.index or a.handle is None or b.handle is None:
                continue
            direct = a.nvlinks_to_bus.get(b.bus_id, 0) if b.bus_id is not None else 0
            # Through the switch fabric every pair gets the smaller side's switch links.
            switched = min(a.nvswitch_links, b.nvswitch_links)
            level = reader.call(a, "nvmlDeviceGetTopologyCommonAncestor", a.handle, b.handle, essential=False)
            links.append(
                Link(
                    src=a.index,
                    dst=b.index,
                    nvlinks=direct or switched,
                    pcie=_TOPOLOGY_LEVELS.get(int(level)) if level is not None else None,
                )
            )
    return tuple(links)


def parse_bus_id(text: str) -> tuple[int, int, int, int] | None:
    """(domain, bus, device, function) of a PCI bus id; NVML prints the domain with 4 or 8 digits."""
    match = _BUS_ID.match(text.strip())
    if match is None:
        return None
    domain, bus, device, function = match.groups()
    return (int(domain or "0", 16), int(bus, 16), int(device, 16), int(function, 16))


def _machine_type(count: int, model: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")
    return f"{count}x-{slug}"


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace").rstrip("\x00")
    return str(value)


def _is_not_supported(lib: Any, exc: BaseException) -> bool:
    not_supported = getattr(lib, "NVMLError_NotSupported", None)
    if isinstance(not_supported, type) and isinstance(exc, not_supported):
        return True
    return getattr(exc, "value", None) == getattr(lib, "NVML_ERROR_NOT_SUPPORTED", 3)


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
