"""A placement's devices as HAMi's pod annotations (pure).

HAMi's device plugin hands a container exactly the GPUs its annotation lists, and
HAMi-core limits each to the annotated memory (MiB) and cores (percent). A whole GPU
(memory_mib 0 in our format) is written as HAMi writes an exclusive GPU: the device's
full memory and 100 cores. The placement covers the pod's summed requests, so all of
its GPUs go to one container entry (pods whose GPUs one container requests).

Each GPU is named by the UUID the node's published topology gives its index,
never by the placement's text: HAMi hands the container the GPU that UUID
names, so a placement naming a free index with a held GPU's UUID must not
decide which GPU it gets (the binder refuses such a placement before; this is
the second guard).

A pod asking a Neuron resource (schemas/vendors.py) gets HAMi's `awsneuron`
annotations instead (schemas/hami_neuron.py): its devices, or its NeuronCores by
index, the lowest no other pod holds (services/binder/neuron_cores.py).
"""

from __future__ import annotations

from collections.abc import Callable

from schemas import hami, hami_neuron
from schemas.events import PlacementEvent
from schemas.vendors import NEURON
from services.binder.neuron_cores import NeuronCoreNames, NoNeuronCores


def hami_annotations(
    placement: PlacementEvent,
    device_memory: Callable[[str, int], int | None],
    now: float,
    *,
    device_uuid: Callable[[str, int], str | None],
    neuron_cores: NeuronCoreNames | None = None,
) -> dict[str, str] | str:
    """HAMi's annotations for the placement, or why they cannot be written (a UUID or memory unknown).

    `device_memory(node, index)`, `device_uuid(node, index)`: the device as the node's topology has it."""
    if any(placement.requests.get(r, "0") not in ("", "0") for r in NEURON.resources):
        return neuron_annotations(placement, now, neuron_cores or NoNeuronCores())
    devices: list[hami.HamiDevice] = []
    for share in placement.devices:
        uuid = device_uuid(placement.node, share.index)
        if not uuid:
            return (
                f"device {share.index} on {placement.node} has no UUID in its topology, which HAMi's annotations need"
            )
        if share.uuid and share.uuid != uuid:
            return f"device {share.index} on {placement.node} is {uuid}, not {share.uuid}"
        memory = share.memory_mib
        if memory == 0:
            known = device_memory(placement.node, share.index)
            if not known:
                return (
                    f"the memory of device {share.index} on {placement.node} is unknown "
                    "(its topology is not seen yet), and HAMi needs it for a whole GPU"
                )
            memory = known
        devices.append(hami.HamiDevice(uuid=uuid, memory_mib=memory, cores=share.cores))
    try:
        return hami.pod_annotations(placement.node, [devices], now)
    except ValueError as exc:
        return str(exc)


def neuron_annotations(placement: PlacementEvent, now: float, cores: NeuronCoreNames) -> dict[str, str] | str:
    """HAMi's `awsneuron` annotations for a Neuron placement, or why they cannot be written."""
    taken: list[hami_neuron.NeuronCores] = []
    for share in placement.devices:
        where = f"device {share.index} on {placement.node}"
        known = cores.free(placement.node, share.index, placement.uid)
        if known is None:
            return f"the NeuronCores of {where} are unknown (its topology is not seen yet), and HAMi needs them"
        per_device, free = known
        wanted = per_device if share.memory_mib == 0 or share.cores >= per_device else share.cores
        if len(free) < wanted:
            return f"{where} has {len(free)} of {per_device} NeuronCores free, the placement asks for {wanted}"
        taken.append(hami_neuron.NeuronCores(index=share.index, per_device=per_device, bits=free[:wanted]))
    cores_resource = NEURON.cores if placement.requests.get(NEURON.cores, "0") not in ("", "0") else ""
    try:
        written = hami_neuron.pod_annotations(placement.node, taken, cores_resource=cores_resource, now=now)
    except ValueError as exc:
        return str(exc)
    for device in taken:
        cores.named(placement.node, device.index, placement.uid, device.bits)
    return written
