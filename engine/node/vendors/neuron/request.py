"""Neuron requests: whole devices or NeuronCores, by the names of schemas/vendors.py's NEURON.

Whole devices: aws.amazon.com/neurondevice (the Neuron device plugin's name) or
aws.amazon.com/neuron (its older name, and the one HAMi's default configuration reads);
NeuronCores: aws.amazon.com/neuroncore. A pod asks one of them: the names count the same
devices, so two in one pod would ask them twice.

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

NEURON = NEURON_DEVICES.whole  # aws.amazon.com/neurondevice
NEURON_NAMES = NEURON_DEVICES.whole_names  # neurondevice, then the older neuron
NEURONCORE = NEURON_DEVICES.cores
USE_UUID = "aws.amazon.com/use-neuron-uuid"
NOUSE_UUID = "aws.amazon.com/nouse-neuron-uuid"
GPU_POLICY = "hami.io/gpu-scheduler-policy"


class NeuronRequest(DeviceRequest, frozen=True, kw_only=True):
    devices: int = 0  # whole devices (aws.amazon.com/neurondevice or neuron); 0 = a core request
    cores: int = 0  # NeuronCores (aws.amazon.com/neuroncore); 0 = a device request
    use_uuids: tuple[str, ...] = ()
    nouse_uuids: tuple[str, ...] = ()
    binpack_devices: bool = False

    @property
    def reads_uuids(self) -> bool:
        return bool(self.use_uuids or self.nouse_uuids)


def parse_neuron_request(request: PodRequest) -> NeuronRequest | None:
    res = request.requests
    asked = [(name, n) for name in (*NEURON_NAMES, NEURONCORE) if (n := optional_int(res, name, low=0))]
    if not asked:
        return None
    if len(asked) > 1:
        raise RequestError(asked[1][0], f"cannot be combined with {asked[0][0]} in one pod: both count Neuron devices")
    resource, count = asked[0]
    devices = 0 if resource == NEURONCORE else count
    cores = count if resource == NEURONCORE else 0
    ann = request.annotations
    return NeuronRequest(
        vendor=Vendor.NEURON,
        resource=resource,
        count=devices or 1,
        node_policy=node_policy_name(ann),
        device_noun=NEURON_DEVICES.device_noun,
        devices=devices,
        cores=cores,
        use_uuids=split_list(ann.get(USE_UUID, "")),
        nouse_uuids=split_list(ann.get(NOUSE_UUID, "")),
        binpack_devices="binpack" in split_list(ann.get(GPU_POLICY, "")),
    )
