"""The trace has no interconnect: each (GPU model, GPU count) gets a documented machine topology.

Mapping (stated in the report):
  8 x V100M16 / V100M32      -> dgx1-v100 (DGX-1 hybrid cube-mesh, NVLink)
  8 x G2 / G3 (undisclosed)  -> pcie-8gpu-2socket (no NVLink assumed: the models are not public)
  4 x any (T4, V100M16/32)   -> pcie-4gpu (PCIe)
  1-2 x any (T4, P100, A10, V100M16) -> the first 1-2 GPUs of pcie-4gpu (PCIe)
Device memory is the model's nominal GB x 1000 MiB, so that a trace share of m milli-GPU is exactly
m x GB MiB and shares add up on a device as milli-GPU do.
"""

from __future__ import annotations

from functools import cache

import msgspec

from schemas.topology import Device, Link
from services.collector.node.topology_files import load_topology

MODEL_MEMORY_GB: dict[str, int] = {"T4": 16, "P100": 16, "V100M16": 16, "V100M32": 32, "A10": 24, "G2": 32, "G3": 32}
DEFAULT_MEMORY_GB = 32  # a model the table does not know (other traces of this format)
NVLINK_8GPU_MODELS = ("V100M16", "V100M32")


class TraceMachine(msgspec.Struct, frozen=True, kw_only=True):
    fixture: str
    machine_type: str
    devices: tuple[Device, ...]
    links: tuple[Link, ...]
    memory_per_gpu_mib: int


def fixture_for(model: str, gpus: int) -> str:
    if gpus == 8 and model in NVLINK_8GPU_MODELS:
        return "dgx1-v100"
    if gpus == 8:
        return "pcie-8gpu-2socket"
    if 1 <= gpus <= 4:
        return "pcie-4gpu"
    raise ValueError(f"gpus: no documented topology for a {gpus}-GPU {model} node (1, 2, 4 or 8 supported)")


@cache
def trace_machine(model: str, gpus: int) -> TraceMachine:
    fixture = fixture_for(model, gpus)
    memory = MODEL_MEMORY_GB.get(model, DEFAULT_MEMORY_GB) * 1000
    topology = (
        load_topology(fixture, model=model, memory_mib=memory) if fixture != "pcie-4gpu" else load_topology(fixture)
    )
    kept = topology.devices[:gpus]
    indices = {d.index for d in kept}
    devices = tuple(msgspec.structs.replace(d, model=model, memory_mib=memory) for d in kept)
    links = tuple(link for link in topology.links if link.src in indices and link.dst in indices)
    return TraceMachine(
        fixture=fixture,
        machine_type=f"{fixture}:{model}" if gpus == len(topology.devices) else f"{fixture}[{gpus}]:{model}",
        devices=devices,
        links=links,
        memory_per_gpu_mib=memory,
    )


MAPPING_TEXT = (
    "8 x V100M16/V100M32 -> dgx1-v100 (NVLink hybrid cube-mesh); "
    "8 x G2/G3 (models undisclosed) -> pcie-8gpu-2socket (PCIe, two sockets); "
    "4 x T4/V100 -> pcie-4gpu; 1-2 x T4/P100/A10/V100 -> first GPUs of pcie-4gpu (PCIe)"
)
