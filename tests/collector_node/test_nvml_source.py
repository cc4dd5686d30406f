"""The NVML source against a fake pynvml: a DGX-1, an NVSwitch box, a PCIe box, and failing devices."""

# The fake copies pynvml's own names (nvmlDeviceGetUUID, NVMLError_NotSupported).
# ruff: noqa: N801, N802, N818

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from schemas.topology import NodeTopology, PcieLevel
from services.collector.node.nvml_source import NvmlUnavailableError, parse_bus_id, read_node
from services.collector.node.topology_files import load_topology

MIB = 1024 * 1024
GPU, IBMNPU, SWITCH = 0, 1, 2


class NVMLError(Exception):
    MESSAGES: ClassVar[dict[int, str]] = {
        3: "Not Supported",
        12: "NVML Shared Library Not Found",
        15: "GPU is lost",
        999: "Unknown Error",
    }

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return self.MESSAGES.get(self.value, f"error {self.value}")


class NVMLError_NotSupported(NVMLError):
    def __init__(self) -> None:
        super().__init__(3)


@dataclass
class FakeGpu:
    name: str
    bus: str  # as NVML prints it: "00000000:10:00.0"
    memory_total_mib: int = 16384
    memory_used_mib: int = 0
    utilization: int = 0
    numa: int | None = None  # None: nvmlDeviceGetNumaNodeId is not supported
    cpu_mask: tuple[int, ...] = (0,)
    nvlinks: list[tuple[str, int]] = field(default_factory=list)  # (remote bus, remote device type) per link
    pending_retirement: bool = False
    failures: dict[str, NVMLError] = field(default_factory=dict)  # NVML call -> the error it raises


class FakeNvml:
    """The part of pynvml the NVML source uses, over a list of fake GPUs."""

    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported
    NVML_FEATURE_ENABLED = 1
    NVML_NVLINK_MAX_LINKS = 18
    NVML_NVLINK_DEVICE_TYPE_GPU = GPU
    NVML_NVLINK_DEVICE_TYPE_IBMNPU = IBMNPU
    NVML_NVLINK_DEVICE_TYPE_SWITCH = SWITCH

    def __init__(
        self, gpus: list[FakeGpu], ancestor: Callable[[int, int], int], init_error: NVMLError | None = None
    ) -> None:
        self.gpus = gpus
        self.ancestor = ancestor
        self.init_error = init_error
        self.initialised = False
        self.shutdowns = 0

    def _gpu(self, handle: int, call: str) -> FakeGpu:
        gpu = self.gpus[handle]
        if call in gpu.failures:
            raise gpu.failures[call]
        return gpu

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise self.init_error
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1
        self.initialised = False

    def nvmlDeviceGetCount(self) -> int:
        assert self.initialised
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self._gpu(index, "nvmlDeviceGetHandleByIndex")
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        self._gpu(handle, "nvmlDeviceGetUUID")
        return f"GPU-fake-{handle}"

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return self._gpu(handle, "nvmlDeviceGetName").name.encode()

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        gpu = self._gpu(handle, "nvmlDeviceGetMemoryInfo")
        return SimpleNamespace(total=gpu.memory_total_mib * MIB, used=gpu.memory_used_mib * MIB)

    def nvmlDeviceGetPciInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(busId=self._gpu(handle, "nvmlDeviceGetPciInfo").bus.encode())

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=self._gpu(handle, "nvmlDeviceGetUtilizationRates").utilization, memory=0)

    def nvmlDeviceGetNumaNodeId(self, handle: int) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetNumaNodeId")
        if gpu.numa is None:
            raise NVMLError_NotSupported()
        return gpu.numa

    def nvmlDeviceGetCpuAffinity(self, handle: int, words: int) -> list[int]:
        return list(self._gpu(handle, "nvmlDeviceGetCpuAffinity").cpu_mask)

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: int) -> int:
        return int(self._gpu(handle, "nvmlDeviceGetRetiredPagesPendingStatus").pending_retirement)

    def nvmlDeviceGetNvLinkState(self, handle: int, link: int) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetNvLinkState")
        if not gpu.nvlinks:
            raise NVMLError_NotSupported()
        if link >= len(gpu.nvlinks):
            raise NVMLError(2)  # NVML_ERROR_INVALID_ARGUMENT: past the last link
        return 1

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: int, link: int) -> SimpleNamespace:
        return SimpleNamespace(busId=self._gpu(handle, "nvmlDeviceGetNvLinkRemotePciInfo").nvlinks[link][0].encode())

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: int, link: int) -> int:
        return self._gpu(handle, "nvmlDeviceGetNvLinkRemoteDeviceType").nvlinks[link][1]

    def nvmlDeviceGetTopologyCommonAncestor(self, a: int, b: int) -> int:
        self._gpu(a, "nvmlDeviceGetTopologyCommonAncestor")
        return self.ancestor(a, b)


class OldDriverNvml(FakeNvml):
    """A driver that cannot tell what is at the far end of an NVLink (no remote device type)."""

    def __getattribute__(self, name: str) -> Any:
        if name == "nvmlDeviceGetNvLinkRemoteDeviceType":
            raise AttributeError(name)
        return super().__getattribute__(name)


NODE, SYSTEM, INTERNAL = 40, 50, 0


def bus(index: int) -> str:
    return f"00000000:{0x10 + index:02X}:00.0"


def socket_of(index: int) -> int:
    return 0 if index < 4 else 1


def socket_level(a: int, b: int) -> int:
    return NODE if socket_of(a) == socket_of(b) else SYSTEM


def dgx1_from_its_print() -> tuple[FakeNvml, NodeTopology]:
    """Fake NVML wired exactly as the DGX-1 print says: k NVLinks for each NVk pair."""
    printed = load_topology("dgx1-v100")
    gpus = [
        FakeGpu(
            name="Tesla V100-SXM2-32GB",
            bus=bus(i),
            memory_total_mib=32510,
            memory_used_mib=100 * i,
            utilization=10 * i,
            cpu_mask=(((1 << 20) - 1) << (20 * socket_of(i)),),  # CPUs 0-19 or 20-39
        )
        for i in range(8)
    ]
    for link in printed.links:
        gpus[link.src].nvlinks += [(bus(link.dst), GPU)] * link.nvlinks
    return FakeNvml(gpus, socket_level), printed


def nvswitch_box(nvml_class: type[FakeNvml] = FakeNvml) -> FakeNvml:
    switches = [f"00000000:{0xA0 + s:02X}:00.0" for s in range(4)]
    gpus = [
        FakeGpu(
            name="NVIDIA H100 80GB HBM3",
            bus=bus(i),
            memory_total_mib=81559,
            numa=socket_of(i),
            nvlinks=[(switches[link % 4], SWITCH) for link in range(18)],
        )
        for i in range(8)
    ]
    return nvml_class(gpus, socket_level)


def pcie_box(ancestor: Callable[[int, int], int] = socket_level) -> FakeNvml:
    return FakeNvml([FakeGpu(name="NVIDIA L40S", bus=bus(i), numa=socket_of(i)) for i in range(8)], ancestor)


def pairs_of(topology: NodeTopology) -> dict[tuple[int, int], tuple[int, PcieLevel | None]]:
    return {(link.src, link.dst): (link.nvlinks, link.pcie) for link in topology.links}


def test_dgx1_links_match_the_print() -> None:
    nvml, printed = dgx1_from_its_print()
    reading = read_node("dgx1", nvml=nvml)
    got = pairs_of(reading.topology)
    assert len(got) == 8 * 7
    for link in printed.links:
        expected_pcie = PcieLevel.NODE if socket_level(link.src, link.dst) == NODE else PcieLevel.SYS
        assert got[(link.src, link.dst)] == (link.nvlinks, expected_pcie)
    assert {d.nvswitch_links for d in reading.topology.devices} == {0}
    assert reading.problems == ()
    assert nvml.shutdowns == 1


def test_dgx1_devices_usage_and_numa_from_cpu_affinity() -> None:
    nvml, _ = dgx1_from_its_print()
    reading = read_node("dgx1", nvml=nvml)
    devices = reading.topology.devices
    assert [d.uuid for d in devices] == [f"GPU-fake-{i}" for i in range(8)]
    assert {(d.model, d.memory_mib, d.healthy) for d in devices} == {("Tesla V100-SXM2-32GB", 32510, True)}
    assert [d.numa_node for d in devices] == [socket_of(i) for i in range(8)]
    assert [(u.index, u.memory_used_mib, u.utilization_pct) for u in reading.usage] == [
        (i, 100 * i, 10 * i) for i in range(8)
    ]
    assert reading.topology.source == "nvml" and reading.topology.node == "dgx1"
    assert reading.topology.machine_type == "8x-tesla-v100-sxm2-32gb"


@pytest.mark.parametrize("nvml_class", [FakeNvml, OldDriverNvml])
def test_nvswitch_links_are_counted_on_the_devices_and_every_pair_gets_them(nvml_class: type[FakeNvml]) -> None:
    reading = read_node("hgx", nvml=nvswitch_box(nvml_class))
    assert {d.nvswitch_links for d in reading.topology.devices} == {18}
    assert {link.nvlinks for link in reading.topology.links} == {18}
    assert [d.numa_node for d in reading.topology.devices] == [socket_of(i) for i in range(8)]


def test_a_pcie_box_has_no_nvlinks_and_the_pcie_levels() -> None:
    reading = read_node("pcie", nvml=pcie_box())
    for (a, b), (nvlinks, pcie) in pairs_of(reading.topology).items():
        assert nvlinks == 0
        assert pcie is (PcieLevel.NODE if socket_of(a) == socket_of(b) else PcieLevel.SYS)
    assert reading.problems == ()


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        (0, PcieLevel.SAME_BOARD),
        (10, PcieLevel.PIX),
        (20, PcieLevel.PXB),
        (30, PcieLevel.PHB),
        (40, PcieLevel.NODE),
        (50, PcieLevel.SYS),
    ],
)
def test_nvml_topology_levels_map_to_the_printed_names(level: int, expected: PcieLevel) -> None:
    reading = read_node("pcie", nvml=pcie_box(lambda a, b: level))
    assert {link.pcie for link in reading.topology.links} == {expected}


def test_a_device_failing_a_query_is_unhealthy_with_the_reason_and_the_rest_is_read() -> None:
    nvml = pcie_box()
    nvml.gpus[2].failures["nvmlDeviceGetUUID"] = NVMLError(15)
    reading = read_node("pcie", nvml=nvml)
    health = {d.index: d.healthy for d in reading.topology.devices}
    assert health == {i: i != 2 for i in range(8)}
    assert {u.index: u.healthy for u in reading.usage} == health
    assert [(p.index, p.call, p.reason) for p in reading.problems] == [(2, "nvmlDeviceGetUUID", "GPU is lost")]
    assert len(reading.topology.links) == 8 * 7  # the lost GPU's links are still known from PCIe


def test_a_device_without_a_handle_is_reported_and_left_out_of_the_links() -> None:
    nvml = pcie_box()
    nvml.gpus[5].failures["nvmlDeviceGetHandleByIndex"] = NVMLError(999)
    reading = read_node("pcie", nvml=nvml)
    assert [d.index for d in reading.topology.devices] == list(range(8))
    assert not reading.topology.devices[5].healthy
    assert all(5 not in (link.src, link.dst) for link in reading.topology.links)
    assert len(reading.topology.links) == 7 * 6
    assert [(p.index, p.call) for p in reading.problems] == [(5, "nvmlDeviceGetHandleByIndex")]


def test_retired_pages_pending_makes_a_device_unhealthy() -> None:
    nvml = pcie_box()
    nvml.gpus[0].pending_retirement = True
    reading = read_node("pcie", nvml=nvml)
    assert [d.healthy for d in reading.topology.devices] == [False] + [True] * 7
    assert "retired" in reading.problems[0].reason


def test_an_unsupported_optional_query_is_not_a_problem() -> None:
    nvml = pcie_box()
    nvml.gpus[1].failures["nvmlDeviceGetUtilizationRates"] = NVMLError_NotSupported()
    reading = read_node("pcie", nvml=nvml)
    assert reading.problems == () and all(d.healthy for d in reading.topology.devices)
    assert reading.usage[1].utilization_pct == 0


def test_a_failed_pair_query_is_recorded_and_leaves_the_level_unknown() -> None:
    nvml = pcie_box()
    nvml.gpus[3].failures["nvmlDeviceGetTopologyCommonAncestor"] = NVMLError(999)
    reading = read_node("pcie", nvml=nvml)
    unknown = {(link.src, link.dst) for link in reading.topology.links if link.pcie is None}
    assert unknown == {(3, other) for other in range(8) if other != 3}
    assert {p.call for p in reading.problems} == {"nvmlDeviceGetTopologyCommonAncestor"}


def test_no_library_is_a_clear_error() -> None:
    nvml = pcie_box()
    nvml.init_error = NVMLError(12)
    with pytest.raises(NvmlUnavailableError, match=r"NVML Shared Library Not Found.*driver"):
        read_node("x", nvml=nvml)


def test_nvml_is_shut_down_when_the_read_fails() -> None:
    nvml = pcie_box()

    def broken_count() -> int:
        raise NVMLError(999)

    nvml.nvmlDeviceGetCount = broken_count  # type: ignore[method-assign]
    with pytest.raises(NvmlUnavailableError, match="nvmlDeviceGetCount failed"):
        read_node("x", nvml=nvml)
    assert nvml.shutdowns == 1


def test_the_real_pynvml_without_a_driver_reports_a_clear_error() -> None:
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("an NVIDIA driver is present on this machine")
    with pytest.raises(NvmlUnavailableError, match="NVML could not be initialised"):
        read_node("here")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("00000000:1A:00.0", (0, 0x1A, 0, 0)),
        ("0000:c7:00.1", (0, 0xC7, 0, 1)),
        ("07:00.0", (0, 7, 0, 0)),
        ("junk", None),
    ],
)
def test_bus_ids_in_both_widths(text: str, expected: tuple[int, int, int, int] | None) -> None:
    assert parse_bus_id(text) == expected
