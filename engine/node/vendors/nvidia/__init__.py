"""NVIDIA GPUs: HAMi's resources and annotations, the topology-aware choice, HAMi's own choice.

request.py        resources and annotations -> NvidiaRequest; the device assignment of a request
plugin.py         the vendor plugin: device filter, search by mode, the measures the node policies read
search.py         default mode: the best-connected set (lookup or branch-and-bound), per NUMA node
hami.py           mode hami: HAMi v2.7's walk, set choice and node usage score
measures.py       what the node policies read of a node: own terms (link, remainder), fill, free shares, HAMi usage
links.py          the pair-score table of a node's GPUs (HAMi's device plugin scores)
"""

from engine.node.vendors.nvidia.plugin import NvidiaPlugin
from engine.node.vendors.nvidia.plugin import NvidiaPlugin as Plugin  # what the registry reads
from engine.node.vendors.nvidia.request import (
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
    NvidiaRequest,
    parse_nvidia_request,
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
    "parse_nvidia_request",
    "GpuPolicy",
    "NvidiaPlugin",
    "NvidiaRequest",
    "Plugin",
]
