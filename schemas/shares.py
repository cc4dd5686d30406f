"""What a valid device share is: one definition for the placer that emits shares and the binder that applies them."""

from __future__ import annotations

from schemas.events import DeviceAssignment

MAX_SHARE_CORES = 100  # cores are a percentage of a GPU (or a count of NeuronCores, always fewer)


def share_problem(share: DeviceAssignment, position: int) -> str | None:
    """Why `share` (devices[position] of a placement) cannot be applied, naming the field; None when valid.

    cores 0 is a valid share: memory only, no compute share, as HAMi's
    `nvidia.com/gpucores: 0`. memory_mib 0 means the device's whole memory.
    """
    if share.index < 0:
        return f"devices[{position}].index: {share.index} is negative"
    if share.memory_mib < 0:
        return f"devices[{position}].memory_mib: {share.memory_mib} is negative"
    if not 0 <= share.cores <= MAX_SHARE_CORES:
        return f"devices[{position}].cores: {share.cores} is outside 0..{MAX_SHARE_CORES}"
    return None
