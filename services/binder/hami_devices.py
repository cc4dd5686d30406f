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
index. A device's cores are taken from the lowest ones the other pods of the device
leave, as the engine counts them (it keeps a device's held cores at its low end).
"""

from __future__ import annotations

from collections.abc import Callable

from schemas import hami, hami_neuron
from schemas.events import PlacementEvent
from schemas.vendors import NEURON
from services.binder.ledger import DeviceLedger

# (node, index, pod uid) -> the device's NeuronCores and how many other pods hold, or None when unknown.
DeviceCores = Callable[[str, int, str], tuple[int, int] | None]


def no_device_cores(node: str, index: int, pod_uid: str) -> tuple[int, int] | None:
    return None


def hami_annotations(
    placement: PlacementEvent,
    device_memory: Callable[[str, int], int | None],
    now: float,
    *,
    device_uuid: Callable[[str, int], str | None],
    device_cores: DeviceCores = no_device_cores,
) -> dict[str, str] | str:
    """HAMi's annotations for the placement, or why they cannot be written (a UUID or memory unknown).

    `device_memory(node, index)`, `device_uuid(node, index)`: the device as the node's topology has it."""
    if any(placement.requests.get(r, "0") not in ("", "0") for r in NEURON.resources):
        return neuron_annotations(placement, now, device_cores)
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


def neuron_annotations(placement: PlacementEvent, now: float, device_cores: DeviceCores) -> dict[str, str] | str:
    """HAMi's `awsneuron` annotations for a Neuron placement, or why they cannot be written."""
    taken: list[hami_neuron.NeuronCores] = []
    for share in placement.devices:
        known = device_cores(placement.node, share.index, placement.uid)
        if known is None:
            where = f"device {share.index} on {placement.node}"
            return f"the NeuronCores of {where} are unknown (its topology is not seen yet), and HAMi needs them"
        per_device, held = known
        wanted = per_device if share.memory_mib == 0 or share.cores >= per_device else share.cores
        if held + wanted > per_device:
            return (
                f"device {share.index} on {placement.node} has {per_device - held} of {per_device} NeuronCores "
                f"free, the placement asks for {wanted}"
            )
        taken.append(
            hami_neuron.NeuronCores(index=share.index, per_device=per_device, bits=tuple(range(held, held + wanted)))
        )
    cores_resource = NEURON.cores if placement.requests.get(NEURON.cores, "0") not in ("", "0") else ""
    try:
        return hami_neuron.pod_annotations(placement.node, taken, cores_resource=cores_resource, now=now)
    except ValueError as exc:
        return str(exc)


def ledger_device_cores(ledger: DeviceLedger) -> DeviceCores:
    """The ledger's answer: a device's NeuronCores from its topology, and the cores its other holders hold
    (a whole-device holder, memory 0, holds them all)."""

    def cores(node: str, index: int, pod_uid: str) -> tuple[int, int] | None:
        capacity = ledger.device_capacity(node, index)
        if capacity is None or capacity.cores <= 0:
            return None
        holders = ledger.holders(node, index)
        held = sum(capacity.cores if a.memory_mib == 0 else a.cores for uid, a in holders.items() if uid != pod_uid)
        return capacity.cores, min(held, capacity.cores)

    return cores
