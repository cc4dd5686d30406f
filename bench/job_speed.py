"""A model of job speed from placement: the link class of a job's devices -> a throughput factor.

Anchors (published measurements):
- Gavel (Narayanan et al., OSDI 2020, artifact throughput tables): communication-heavy
  training (language models, VGG-class) on 8 V100s spread over servers runs at about
  0.1-0.2 of its packed (one NVLink server) throughput; ResNet-50 stays near 1.0.
- Pollux (Qiao et al., OSDI 2021, artifact): BERT across 2 PCIe nodes at 0.27-0.45 of one node.
The intra-node steps between "all pairs on NVLink" (1.0) and "across servers" (0.15,
Gavel's midpoint) are this benchmark's assumption, ordered by the bandwidth of the
weakest hop (NVLink > PCIe switch > host bridge > CPU interconnect); they are not measured.
Compute-bound jobs (ResNet-50-like) get 1.0 whatever the placement.
"""

from __future__ import annotations

from bench.links import LinkClass

COMM_HEAVY_FACTOR: dict[LinkClass, float] = {
    LinkClass.SINGLE: 1.0,
    LinkClass.NVLINK_ALL: 1.0,
    LinkClass.NVLINK_CONNECTED: 0.85,  # assumption: rings still run on NVLink, some hops relayed
    LinkClass.PCIE_SWITCH: 0.6,  # assumption
    LinkClass.PCIE_HOST: 0.45,  # assumption, near Pollux's 2-node PCIe figure's upper end
    LinkClass.CROSS_SOCKET: 0.35,  # assumption
}
CROSS_NODE_FACTOR = 0.15  # Gavel: 0.1-0.2 for communication-heavy models spread over servers
COMPUTE_BOUND_FACTOR = 1.0  # Gavel: ResNet-50 ~1.0 when spread
COMM_HEAVY_SHARE = 0.5  # the stated job mix: half the multi-device jobs are communication-heavy


def throughput_factor(link: LinkClass, comm_heavy: bool) -> float:
    return COMM_HEAVY_FACTOR[link] if comm_heavy else COMPUTE_BOUND_FACTOR
