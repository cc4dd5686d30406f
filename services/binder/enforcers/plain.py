"""A plain device plugin (`device-plugin`): only the node is enforced, the device choice is advice.

The kubelet's device manager picks the devices itself, so there is nothing to write besides the
Binding every pod gets (the device annotations and the seal): every hook keeps its default.
"""

from __future__ import annotations

from schemas.enforcement import Enforcement
from schemas.events import PlacementEvent
from services.binder.enforcers.base import BinderParts, Enforcer


class PlainDevicePlugin(Enforcer):
    def __init__(self, parts: BinderParts) -> None:
        del parts  # needs none of them

    def applies(self, placement: PlacementEvent) -> bool:
        return placement.enforcement is Enforcement.DEVICE_PLUGIN
