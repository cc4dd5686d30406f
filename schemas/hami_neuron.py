"""HAMi's `awsneuron` pod annotations, which the AWS Neuron device plugin reads (HAMi v2.10).

HAMi's scheduler writes, for a pod of Neuron devices or NeuronCores (pkg/device/awsneuron,
`PatchAnnotations`), what the Neuron scheduler extension writes for the Neuron device plugin
in its scheduler-extension mode:

- `AWS_NEURON_IDS`: the device indices for a pod asking whole devices; the NeuronCore
  indices (device i of c cores holds i x c .. i x c + c - 1) for a pod asking
  `aws.amazon.com/neuroncore`, with `NEURON_RESOURCE_TYPE` naming that resource;
- `NEURON_ALLOC_TIME` (Unix nanoseconds), `NEURON_ALLOCATED` "false" (the device plugin sets
  it in Allocate), `aws.amazon.com/predicate-node` (the node);
- `hami.io/aws-neuron-devices-allocated`: HAMi's device list (schemas/hami.py's format) with
  HAMi's device IDs `<node>-AWSNeuron-<index>`, type `AWSNeuron`, memory 0 and the device's
  cores as a bit mask, from which HAMi counts a node's usage.
"""

from __future__ import annotations

import msgspec

from schemas import hami

NEURON_TYPE = "AWSNeuron"  # HAMi's device type (awsneuron.AWSNeuronDevice)
DEVICES_ALLOCATED = "hami.io/aws-neuron-devices-allocated"
ASSIGNED_IDS = "AWS_NEURON_IDS"
ALLOC_TIME = "NEURON_ALLOC_TIME"
ALLOCATED = "NEURON_ALLOCATED"
RESOURCE_TYPE = "NEURON_RESOURCE_TYPE"
PREDICATE_NODE = "aws.amazon.com/predicate-node"


class NeuronCores(msgspec.Struct, frozen=True, kw_only=True):
    """The NeuronCores a pod takes of one device: bit positions 0 .. per_device - 1."""

    index: int
    per_device: int
    bits: tuple[int, ...]

    @property
    def mask(self) -> int:
        return sum(1 << bit for bit in self.bits)


def device_id(node: str, index: int) -> str:
    """HAMi's ID of a Neuron device (awsneuron.GetNodeDevices)."""
    return f"{node}-{NEURON_TYPE}-{index}"


def pod_annotations(node: str, devices: list[NeuronCores], *, cores_resource: str, now: float) -> dict[str, str]:
    """HAMi's annotations for these devices; `cores_resource`: the NeuronCore resource the pod asked ("" if none)."""
    if cores_resource:
        ids = [d.index * d.per_device + bit for d in devices for bit in d.bits]
    else:
        ids = [d.index for d in devices]
    listed = [
        hami.HamiDevice(uuid=device_id(node, d.index), type=NEURON_TYPE, memory_mib=0, cores=d.mask) for d in devices
    ]
    stamp = str(int(now))
    written = {
        hami.VGPU_NODE: node,
        hami.VGPU_TIME: stamp,
        hami.BIND_PHASE: hami.BIND_ALLOCATING,
        hami.BIND_TIME: stamp,
        DEVICES_ALLOCATED: hami.encode_pod_devices([listed]),
        ASSIGNED_IDS: ",".join(str(i) for i in ids),
        ALLOC_TIME: str(int(now * 1_000_000_000)),
        ALLOCATED: "false",
        PREDICATE_NODE: node,
    }
    if cores_resource:
        written[RESOURCE_TYPE] = cores_resource
    return written
