"""NVIDIA GPUs: HAMi's resources and annotations, the topology-aware choice, HAMi's own choice.

plugin.py   the vendor plugin (request, filter, search, node score)
links.py    the pair-score table of a node's GPUs (HAMi's device plugin scores)
"""

from engine.node.vendors.nvidia.plugin import (
    GPU,
    GPU_POLICY,
    GPUCORES,
    GPUMEM,
    GPUMEM_PERCENTAGE,
    NOUSE_TYPE,
    NOUSE_UUID,
    NUMA_BIND,
    USE_TYPE,
    USE_UUID,
    GpuPolicy,
    NvidiaPlugin,
    NvidiaRequest,
    plugin,
)

__all__ = [
    "GPU",
    "GPUCORES",
    "GPUMEM",
    "GPUMEM_PERCENTAGE",
    "GPU_POLICY",
    "NOUSE_TYPE",
    "NOUSE_UUID",
    "NUMA_BIND",
    "USE_TYPE",
    "USE_UUID",
    "GpuPolicy",
    "NvidiaPlugin",
    "NvidiaRequest",
    "plugin",
]
