"""Which NeuronCores of a Neuron device each pod gets, by index, for HAMi's annotations.

The engine counts a pod's NeuronCores per device (DeviceAssignment.cores), never which
ones; HAMi's annotations name them (`AWS_NEURON_IDS`, schemas/hami_neuron.py). So the
binder names them: the lowest cores of the device no other holder has, and remembers
what it named for each pod while the pod holds the device (the ledger says who does).
A holder it never named (bound before this process started) is taken to have the lowest
cores left, as a binder names them.
"""

from __future__ import annotations

from typing import Protocol

from services.binder.ledger import DeviceLedger


class NeuronCoreNames(Protocol):
    def free(self, node: str, index: int, pod_uid: str) -> tuple[int, tuple[int, ...]] | None:
        """The device's NeuronCore count and the cores no other pod holds, lowest first; None when unknown."""
        ...

    def named(self, node: str, index: int, pod_uid: str, cores: tuple[int, ...]) -> None:
        """The cores the pod's annotations name."""
        ...


class NoNeuronCores:
    """Nothing known: every Neuron device's cores are unknown (a binder without a ledger)."""

    def free(self, node: str, index: int, pod_uid: str) -> tuple[int, tuple[int, ...]] | None:
        return None

    def named(self, node: str, index: int, pod_uid: str, cores: tuple[int, ...]) -> None:
        return None


class NeuronCoreBook:
    """The cores this binder named per device and pod, kept only for the device's current holders."""

    def __init__(self, ledger: DeviceLedger) -> None:
        self._ledger = ledger
        self._named: dict[tuple[str, int], dict[str, tuple[int, ...]]] = {}  # (node, index) -> pod uid -> cores

    def free(self, node: str, index: int, pod_uid: str) -> tuple[int, tuple[int, ...]] | None:
        capacity = self._ledger.device_capacity(node, index)
        if capacity is None or capacity.cores <= 0:
            return None
        per_device = capacity.cores
        holders = self._ledger.holders(node, index)
        named = self._named.get((node, index), {})
        for gone in [uid for uid in named if uid not in holders]:
            del named[gone]
        used: set[int] = set()
        unnamed = 0
        for uid, share in holders.items():
            if uid == pod_uid:
                continue
            if uid in named:
                used.update(named[uid])
            else:  # a whole device (memory 0) holds every core
                unnamed += per_device if share.memory_mib == 0 else share.cores
        left = [core for core in range(per_device) if core not in used]
        return per_device, tuple(left[unnamed:])

    def named(self, node: str, index: int, pod_uid: str, cores: tuple[int, ...]) -> None:
        self._named.setdefault((node, index), {})[pod_uid] = cores
