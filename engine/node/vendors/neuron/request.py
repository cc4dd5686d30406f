"""Neuron requests: aws.amazon.com/neuron (whole devices) or aws.amazon.com/neuroncore (NeuronCores).

Annotations: aws.amazon.com/use-neuron-uuid and aws.amazon.com/nouse-neuron-uuid (comma
lists), hami.io/node-scheduler-policy (checked by the plugin against the engine's policies),
hami.io/gpu-scheduler-policy (binpack | spread orders HAMi's walk).
"""

from __future__ import annotations

from engine.core.model import PodRequest
from engine.core.quantities import optional_int, split_list
from engine.node.vendor import DeviceRequest, RequestError, node_policy_name
from schemas.topology import Vendor
from schemas.vendors import NEURON as NEURON_DEVICES

NEURON = NEURON_DEVICES.whole
NEURONCORE = NEURON_DEVICES.cores
USE_UUID = "aws.amazon.com/use-neuron-uuid"
NOUSE_UUID = "aws.amazon.com/nouse-neuron-uuid"
GPU_POLICY = "hami.io/gpu-scheduler-policy"


class NeuronRequest(DeviceRequest, frozen=True, kw_only=True):
    devices: int = 0  # whole devices (aws.amazon.com/neuron); 0 = a core request
    cores: int = 0  # NeuronCores (aws.amazon.com/neuroncore); 0 = a device request
    use_uuids: tuple[str, ...] = ()
    nouse_uuids: tuple[str, ...] = ()
    binpack_devices: bool = False

    @property
    def reads_uuids(self) -> bool:
        return bool(self.use_uuids or self.nouse_uuids)


def parse_neuron_request(request: PodRequest) -> NeuronRequest | None:
    res = request.requests
    devices = optional_int(res, NEURON, low=0)
    cores = optional_int(res, NEURONCORE, low=0)
    if devices and cores:
        raise RequestError(NEURONCORE, f"cannot be combined with {NEURON} in one pod")
    if not devices and not cores:
        return None
    ann = request.annotations
    return NeuronRequest(
        vendor=Vendor.NEURON,
        resource=NEURON if devices else NEURONCORE,
        count=devices or 1,
        node_policy=node_policy_name(ann),
        device_noun=NEURON_DEVICES.device_noun,
        devices=devices or 0,
        cores=cores or 0,
        use_uuids=split_list(ann.get(USE_UUID, "")),
        nouse_uuids=split_list(ann.get(NOUSE_UUID, "")),
        binpack_devices="binpack" in split_list(ann.get(GPU_POLICY, "")),
    )
