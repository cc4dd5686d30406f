"""Device topology of one node: devices and the links between them.

Shared by the wire events (topology.nodes) and the engine's snapshot, so a
device means the same thing everywhere.
"""

from __future__ import annotations

import enum
from typing import Annotated

import msgspec

# Decoding rejects a negative value with the field named ("Expected `int` >= 0 - at `$.devices[0].index`"),
# so a bad topology is dead-lettered at the edge instead of entering the placer's view.
NonNegative = Annotated[int, msgspec.Meta(ge=0)]


class Vendor(enum.StrEnum):
    NVIDIA = "nvidia"
    METAX = "metax"
    NEURON = "neuron"


class PcieLevel(enum.StrEnum):
    """The closest common PCIe point of two devices, as `nvidia-smi topo -m` names it."""

    SAME_BOARD = "SAME_BOARD"  # two GPUs on one board (NVML_TOPOLOGY_INTERNAL)
    PIX = "PIX"  # one PCIe switch
    PXB = "PXB"  # several PCIe switches, no host bridge
    PHB = "PHB"  # a PCIe host bridge
    NODE = "NODE"  # host bridges within one NUMA node
    SYS = "SYS"  # across NUMA nodes (the CPU interconnect)


class Device(msgspec.Struct, frozen=True, kw_only=True):
    """One accelerator as the node agent sees it."""

    index: NonNegative  # the device's own index on the node (NVML / driver index), never a sort position
    uuid: str
    vendor: Vendor
    model: str
    memory_mib: NonNegative
    numa_node: int | None = None
    cores: NonNegative = 100  # shareable compute units: percent for GPUs, NeuronCores for Neuron
    link_zone: int | None = None  # MetaXLink group (> 0); None or <= 0 = no zone
    nvswitch_links: NonNegative = 0  # NVLinks to the NVSwitch fabric (0 = direct links only)
    healthy: bool = True


class Link(msgspec.Struct, frozen=True, kw_only=True):
    """One direction of the connection between two devices (src -> dst).

    Both directions are reported; a pair whose directions disagree is
    asymmetric and the engine scores it 0 with a warning.
    """

    src: NonNegative
    dst: NonNegative
    nvlinks: NonNegative = 0  # bonded NVLinks (or MetaXLink / NeuronLink lanes)
    pcie: PcieLevel | None = None


class NodeTopology(msgspec.Struct, frozen=True, kw_only=True):
    """Everything static about a node's devices."""

    node: str
    machine_type: str  # e.g. "dgx-h100", "trn1.32xlarge"; names the fixture or NVML product
    devices: tuple[Device, ...]
    links: tuple[Link, ...] = ()
    source: str = ""  # where the topology came from: "nvml", or the fixture and its public source
