"""Expected device fragmentation of one node against the cluster's workload (FGD), and the policy's score.

After Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads
with Fragmentation Gradient Descent" (USENIX ATC 2023), section 3:

  F(node) = sum over classes c of w_c * frag_c(node) / sum of w_c, where
  frag_c = every free milli of the node, when c cannot run there at all: a
           CPU-only class (it never uses a GPU), a class asking more CPU than the
           node has free (when the node's CPU is known), or fewer than c.gpus
           devices that can take c's share (model not accepted, too little free,
           or not idle for a whole-device class);
         = the free milli of each device c cannot use, otherwise.

A device's free share is in thousandths of the device (`MILLI` = all of it).

The `fragmentation` node policy scores a node `level + tie`:
- level: FGD's integer score of the change, trunc(100 * sigmoid(-delta / 1000)).
  Coarse on purpose: deltas that differ by a few milli are the same level, so
  the rules below decide between them instead of noise.
- tie, in [0, TIE_SPAN): for a GPU pod, a node already in use before an idle
  one (idle nodes stay whole for multi-GPU pods); then CPU spare (free CPU after
  the pod minus what the node's free GPUs would need at the node's own CPU per
  GPU): a CPU-heavy pod (more CPU per GPU than the workload's median, or no
  GPU) goes where most is spare, a pod light on CPU where least is, so GPUs
  are not stranded without CPU.
Equal scores go to the node whose name sorts first (the engine's rule).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec

from engine.core.model import MILLI, NodeState, WorkloadClass
from schemas.quantity import QuantityError, milli_value

DIGITS = 6  # figures are rounded so that float noise never reorders equal answers
LEVELS = 100  # FGD's node score range: 0..100
TIE_SPAN = 0.98  # the tie term never lifts a node to the next level
CPU_SCALE = 128_000  # milli-CPU: CPU spare is clipped to +-1 at this (a large node's CPU)


class FreeShare(msgspec.Struct, frozen=True, kw_only=True):
    """What one device has left, as a vendor reports it to the measure."""

    milli: int  # free thousandths of the device (0..MILLI)
    idle: bool  # no pod on it: only an idle device takes a whole-device class
    model: str = ""


def accepts(workload_class: WorkloadClass, model: str) -> bool:
    if not workload_class.models:
        return True
    upper = model.upper()
    return any(m.upper() in upper for m in workload_class.models)


def usable_by(workload_class: WorkloadClass, device: FreeShare) -> bool:
    if not accepts(workload_class, device.model):
        return False
    if workload_class.milli >= MILLI:
        return device.idle and device.milli >= MILLI
    return device.milli >= workload_class.milli


def class_fragment(devices: Sequence[FreeShare], workload_class: WorkloadClass, cpu_free: int | None = None) -> int:
    """Free milli of the node that a pod of this class cannot use (`cpu_free` None: CPU not known)."""
    if workload_class.gpus == 0 or (cpu_free is not None and workload_class.cpu_milli > cpu_free):
        return sum(d.milli for d in devices)
    usable = [usable_by(workload_class, d) for d in devices]
    if sum(usable) < workload_class.gpus:
        return sum(d.milli for d in devices)
    return sum(d.milli for d, ok in zip(devices, usable, strict=True) if not ok)


def fragmentation(
    devices: Sequence[FreeShare], workload: Sequence[WorkloadClass], cpu_free: int | None = None
) -> float:
    """F(node): the expected free milli the next pod of the workload cannot use; 0 for no workload."""
    total_weight = sum(c.weight for c in workload)
    if total_weight <= 0:
        return 0.0
    value = sum(c.weight * class_fragment(devices, c, cpu_free) for c in workload) / total_weight
    return round(value, DIGITS)


def reads_cpu(workload: Sequence[WorkloadClass]) -> bool:
    """Whether the workload's classes name CPU: then the measure needs each node's free CPU."""
    return any(c.cpu_milli for c in workload)


def level(delta: float) -> int:
    """FGD's integer node score of a fragmentation change (lower delta, higher level)."""
    exponent = delta / MILLI
    if exponent > 700:  # exp would overflow: the score is 0 long before
        return 0
    return math.trunc(LEVELS / (1.0 + math.exp(exponent)))


def heavy_ratio(workload: tuple[WorkloadClass, ...]) -> float | None:
    """The workload's weighted median of milli-CPU per whole GPU over its GPU classes (None: no CPU known)."""
    ratios = sorted((c.cpu_milli * MILLI / (c.gpus * c.milli), c.weight) for c in workload if c.gpus and c.cpu_milli)
    total = sum(w for _, w in ratios)
    if total <= 0:
        return None
    running = 0.0
    for ratio, weight in ratios:
        running += weight
        if running >= total / 2:
            return ratio
    return ratios[-1][0]


class NodeCpu(msgspec.Struct, frozen=True, kw_only=True):
    """A node's CPU as the policy reads it, in milli-CPU."""

    allocatable: int
    free: int  # before the pod


def node_cpu(node: NodeState) -> NodeCpu | None:
    """The node's CPU, or None when it reports none (or one the node rules will refuse as unreadable)."""
    if node.allocatable is None or "cpu" not in node.allocatable:
        return None
    try:
        allocatable = milli_value(node.allocatable["cpu"])
        return NodeCpu(allocatable=allocatable, free=allocatable - milli_value(node.requested.get("cpu", "0")))
    except QuantityError:
        return None


class PodShape(msgspec.Struct, frozen=True, kw_only=True):
    """What the tie term reads of the pod."""

    cpu_milli: int
    gpu_milli: int  # summed over its devices (0: a CPU-only pod)


def tie(
    pod: PodShape,
    cpu: NodeCpu | None,
    gpus: int,
    gpu_free_after: int,
    busy: bool,
    heavy: float | None,
) -> float:
    """The tie term in [0, TIE_SPAN): see the module docstring. `gpus`: the node's GPUs; `gpu_free_after`:
    their free milli once the pod holds its share; `busy`: some GPU of the node is in use before the pod."""
    by_cpu = 0.5
    if cpu is not None and gpus:
        cpu_per_gpu = cpu.allocatable / gpus
        spare = (cpu.free - pod.cpu_milli) - gpu_free_after / MILLI * cpu_per_gpu
        spare_01 = (min(1.0, max(-1.0, spare / CPU_SCALE)) + 1.0) / 2.0
        heavy_pod = pod.gpu_milli == 0 or (heavy is not None and pod.cpu_milli * MILLI / pod.gpu_milli > heavy)
        by_cpu = spare_01 if heavy_pod else 1.0 - spare_01
    if pod.gpu_milli == 0:
        return round(by_cpu * TIE_SPAN, DIGITS)
    return round(((1.0 if busy else 0.0) + by_cpu) / 2.0 * TIE_SPAN, DIGITS)
