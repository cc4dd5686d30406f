"""Annotations topoplace writes on pods: the documented device-assignment format.

`topoplace.io/devices` holds a JSON list of DeviceAssignment objects, e.g.
`[{"index":0,"uuid":"GPU-1c2...","memory_mib":0,"cores":100}]`
(memory_mib 0 = the whole device). `topoplace.io/node` names the node the
devices belong to, so a reader can check the pair without the binding.
"""

from __future__ import annotations

import msgspec

from schemas.events import DeviceAssignment

DEVICES = "topoplace.io/devices"
NODE = "topoplace.io/node"
DECISION = "topoplace.io/decision-id"
SCHEDULER_NAME = "topoplace"

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(tuple[DeviceAssignment, ...])


def encode_devices(devices: tuple[DeviceAssignment, ...]) -> str:
    return _encoder.encode(devices).decode()


def decode_devices(value: str) -> tuple[DeviceAssignment, ...]:
    """Raises msgspec.ValidationError / DecodeError naming the bad field."""
    return _decoder.decode(value)
