"""Whether a device share fits beside the shares already on its device: memory (0 = all of it) and
cores, as the device ledger (ledger.py) checks every placement against what it holds."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from schemas.events import DeviceAssignment
from schemas.topology import Vendor

DEFAULT_DEVICE_CORES = 100  # a GPU's compute share is a percentage; used when a node's topology is unknown


class DeviceCapacity(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    memory_mib: int
    cores: int = DEFAULT_DEVICE_CORES
    vendor: Vendor | None = None
    uuid: str = ""


def _describe_holders(others: Mapping[str, DeviceAssignment]) -> str:
    return ", ".join(sorted(others))


def device_collision(
    node: str,
    share: DeviceAssignment,
    capacity: DeviceCapacity | None,
    others: Mapping[str, DeviceAssignment],
) -> str | None:
    if not others:
        return None
    where = f"device {share.index} on node {node}"
    held_by = f"held by pod {_describe_holders(others)}"
    takes_all_memory = share.memory_mib == 0 or any(o.memory_mib == 0 for o in others.values())
    if capacity is None:
        if takes_all_memory:
            return f"{where} is {held_by}; a share of all its memory needs it idle"
    else:
        used = sum(_memory_of(o, capacity) for o in others.values())
        wanted = _memory_of(share, capacity)
        if used + wanted > capacity.memory_mib:
            free = max(capacity.memory_mib - used, 0)
            return (
                f"{where} has {free} MiB free of {capacity.memory_mib} MiB, "
                f"the placement asks for {wanted} MiB ({held_by})"
            )
    total_cores = DEFAULT_DEVICE_CORES if capacity is None else capacity.cores
    used_cores = sum(min(o.cores, total_cores) for o in others.values())
    wanted_cores = min(share.cores, total_cores)
    # A memory-only share (cores 0) still runs on the device: it needs a core left, as the engine asks.
    if used_cores + wanted_cores > total_cores or (wanted_cores == 0 and used_cores >= total_cores):
        free_cores = max(total_cores - used_cores, 0)
        return (
            f"{where} has {free_cores} of {total_cores} cores free, the placement asks for {wanted_cores} ({held_by})"
        )
    return None


def _memory_of(share: DeviceAssignment, capacity: DeviceCapacity) -> int:
    return capacity.memory_mib if share.memory_mib == 0 else share.memory_mib
