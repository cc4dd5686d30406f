"""The pod as the vendors read it: the vendor that claims it, and its parsed device request."""

from __future__ import annotations

import msgspec

from engine.core.model import Mode, PodRequest, WorkloadClass
from engine.decide.node_rules import pod_cpu_milli
from engine.node.answer import NodeFit
from engine.node.registry import Vendors
from engine.node.vendor import DeviceRequest, NodeScore, SetChoice, VendorPlugin

# A pod that asks for no device fits every node's devices with nothing to choose.
NO_DEVICES = NodeFit(node="", choice=SetChoice(assignments=()), score=NodeScore(score=0.0))


class Claim(msgspec.Struct, frozen=True, kw_only=True):
    """The pod as the vendors read it: the vendor that claims it and its parsed request (None: no devices)."""

    plugin: VendorPlugin | None
    request: DeviceRequest | None


def claim(
    vendors: Vendors,
    request: PodRequest,
    mode: Mode,
    workload: tuple[WorkloadClass, ...],
    *,
    cpu: bool = False,
) -> Claim:
    """The pod's vendor and parsed request; `cpu`: the index reads each node's CPU, so a node policy that
    reads the workload (fragmentation) weighs the pod's. A pod without devices is still scored by such a
    policy when the workload is known (FGD places CPU-only pods too); otherwise it asks nothing of the vendors."""
    claimed = vendors.claim(request)
    if claimed is None and workload and mode is Mode.DEFAULT:
        claimed = vendors.claim_host(request)
    if claimed is None:
        return Claim(plugin=None, request=None)
    plugin, device_request = claimed
    device_request = vendors.policies.with_workload(
        device_request, workload, mode, pod_cpu_milli(request) if cpu else None
    )
    return Claim(plugin=plugin, request=device_request)
