"""DeviceTaintRules: taints an administrator puts on published devices, added to the slices' own; pure.

A rule's selector names a driver, a pool and a device name, each optional: the empty
selector matches every device, a rule without one matches none (the API's words). A
device keeps its slice's taints and gets each matching rule's taint after them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from engine.node.dra.model import Device, DeviceTaintRule, DeviceTaintSelector, ResourceSlice


def _matches(selector: DeviceTaintSelector | None, slice_: ResourceSlice, device: Device) -> bool:
    if selector is None:
        return False
    return (
        (selector.driver is None or selector.driver == slice_.spec.driver)
        and (selector.pool is None or selector.pool == slice_.spec.pool.name)
        and (selector.device is None or selector.device == device.name)
    )


def with_taint_rules(slices: Iterable[ResourceSlice], rules: Sequence[DeviceTaintRule]) -> tuple[ResourceSlice, ...]:
    """The slices with the rules' taints on the devices they select (a slice no rule touches is kept as is)."""
    out = []
    for s in slices:
        devices = []
        touched = False
        for device in s.spec.devices:
            added = tuple(rule.spec.taint for rule in rules if _matches(rule.spec.device_selector, s, device))
            if added:
                touched = True
                device = msgspec.structs.replace(device, taints=(*device.taints, *added))
            devices.append(device)
        out.append(
            msgspec.structs.replace(s, spec=msgspec.structs.replace(s.spec, devices=tuple(devices))) if touched else s
        )
    return tuple(out)
