"""The binder's seal on a pod's devices: only a pod bound by topoplace, for its decision, holds devices.

`topoplace.io/devices` is an annotation any tenant can write (on a pod that asks
for no GPU, with `spec.nodeName` set, or edited after the bind). So the binder
writes beside it, in the same Binding, `topoplace.io/seal`: the record it
decided (node, decision id, the devices text) and an HMAC-SHA256 over the
pod's uid and that record, with a key only the binder and the cluster watcher
read (a Kubernetes Secret). Readers take a pod's devices from a seal that
verifies for that uid and node, never from `topoplace.io/devices`, which is
then informational: an edit after the bind changes nothing, a copied seal
does not verify for another pod or node, and a pod without a valid seal
counts by its resource requests only.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

import msgspec

from schemas import annotations as pod_annotations
from schemas.events import DeviceAssignment

SEAL = "topoplace.io/seal"
MIN_KEY_BYTES = 16
# A seal the binder writes is a few hundred bytes; a longer one is not decoded at all.
MAX_SEAL_BYTES = 16_384
_DOMAIN = b"topoplace.io/seal/v1\n"


class SealedRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What the binder decided for the pod, as it sealed it."""

    node: str
    decision_id: str
    devices: str  # the devices text, as `topoplace.io/devices` (schemas.annotations) holds it


class _Seal(msgspec.Struct, frozen=True, kw_only=True):
    record: SealedRecord
    mac: str  # hex HMAC-SHA256 over the pod's uid and the record


class SealCheck(msgspec.Struct, frozen=True, kw_only=True):
    """What a pod's annotations prove: its devices (None: none count) and, if any, why not."""

    devices: tuple[DeviceAssignment, ...] | None = None
    decision_id: str = ""
    problem: str = ""  # "" when the seal verifies or the pod claims no devices at all


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(_Seal)


class DecisionKey:
    """The key of the seal. A plain class with a masked repr: it reaches no log line or traceback."""

    __slots__ = ("_secret",)

    def __init__(self, secret: bytes) -> None:
        if len(secret) < MIN_KEY_BYTES:
            raise ValueError(f"a decision key needs at least {MIN_KEY_BYTES} bytes, got {len(secret)}")
        self._secret = secret

    def __repr__(self) -> str:
        return "DecisionKey('***')"

    __str__ = __repr__

    def _mac(self, uid: str, record: SealedRecord) -> str:
        message = _DOMAIN + _encoder.encode((uid, record.node, record.decision_id, record.devices))
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def seal(self, uid: str, node: str, decision_id: str, devices: tuple[DeviceAssignment, ...]) -> str:
        """The seal annotation's value for this pod's binding."""
        record = SealedRecord(node=node, decision_id=decision_id, devices=pod_annotations.encode_devices(devices))
        return _encoder.encode(_Seal(record=record, mac=self._mac(uid, record))).decode()

    def check(self, uid: str, node: str, annotations: Mapping[str, str]) -> SealCheck:
        """The devices the pod (bound to `node`) holds: only what a seal for this uid and node says."""
        text = annotations.get(SEAL)
        if text is None:
            if pod_annotations.DEVICES not in annotations:
                return SealCheck()
            return SealCheck(problem=f"{pod_annotations.DEVICES} without {SEAL}: not bound by topoplace's binder")
        if len(text) > MAX_SEAL_BYTES:
            return SealCheck(problem=f"{len(text)} characters, more than a seal's {MAX_SEAL_BYTES}")
        try:
            sealed = _decoder.decode(text)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            return SealCheck(problem=f"not a seal: {exc}")
        if not hmac.compare_digest(sealed.mac, self._mac(uid, sealed.record)):
            return SealCheck(problem="does not verify: not sealed by topoplace's binder for this pod")
        if sealed.record.node != node:
            return SealCheck(problem=f"sealed for node {sealed.record.node!r}, the pod is bound to {node!r}")
        try:
            devices = pod_annotations.decode_devices(sealed.record.devices)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            return SealCheck(problem=f"sealed devices unreadable: {exc}")
        return SealCheck(devices=devices, decision_id=sealed.record.decision_id)
