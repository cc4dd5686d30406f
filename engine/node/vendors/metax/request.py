"""Reading a pod's MetaX resources and annotations into a MetaxRequest.

Resources (HAMi pkg/device/metax/config.go names): ``metax-tech.com/sgpu``
(shares of a card), ``metax-tech.com/vcore`` (percent of a card's compute,
default 100 = the card alone), ``metax-tech.com/vmemory`` (per card; a bare
number is Gi, a number with a unit is read in that unit; none = the card's
whole memory, HAMi's memPercent 100), ``metax-tech.com/gpu`` (whole cards).
"""

from __future__ import annotations

import enum
import re

from engine.core.model import PodRequest
from engine.core.quantities import (
    optional_int,
    parse_bool,
    parse_quantity,
    split_list,
)
from engine.node.vendor import DeviceRequest, RequestError, node_policy_name
from engine.node.vendors.metax.qos import (
    APP_CLASS_ANNOTATION,
    APP_CLASSES,
    DEFAULT_QOS,
    EXCLUSIVE_CORES,
    ONLINE,
    QOS_ANNOTATION,
    QOS_POLICIES,
)
from schemas.topology import Vendor
from schemas.vendors import METAX

SGPU = METAX.shares
VCORE = METAX.compute_share
VMEMORY = METAX.memory_share
GPU = METAX.whole
TOPOLOGY_AWARE = "metax-tech.com/sgpu-topology-aware"
USE_UUID = "metax-tech.com/use-gpuuuid"
NOUSE_UUID = "metax-tech.com/nouse-gpuuuid"
GPU_POLICY = "hami.io/gpu-scheduler-policy"

_GPU_POLICIES = ("binpack", "spread", "topology-aware", "mutex", "numa")
_HAS_UNIT = re.compile(r"[a-zA-Z]")
MIB = 2**20


class MetaxKind(enum.StrEnum):
    SGPU = "sgpu"  # shares of cards (metax-tech.com/sgpu)
    GPU = "gpu"  # whole cards (metax-tech.com/gpu)


class MetaxRequest(DeviceRequest, frozen=True, kw_only=True):
    kind: MetaxKind
    memory_mib: int = 0  # per card; 0 = the card's whole memory
    cores: int = EXCLUSIVE_CORES  # vcore percent per card
    qos: str = ""  # "" for online pods and whole cards
    app_class: str = ""  # "", "online" or "offline"
    topology_aware: bool | None = None  # the pod's annotation; None = not given
    use_uuids: tuple[str, ...] = ()
    nouse_uuids: tuple[str, ...] = ()
    mutex: bool = False
    binpack_cards: bool = False  # hami.io/gpu-scheduler-policy binpack (default spread)

    @property
    def reads_uuids(self) -> bool:
        return bool(self.use_uuids or self.nouse_uuids)

    @property
    def exclusive(self) -> bool:
        """Whole cards: the card alone (vcore 100) or metax-tech.com/gpu; online pods never are."""
        return self.kind is MetaxKind.GPU or (self.cores == EXCLUSIVE_CORES and self.app_class == "")

    @property
    def online(self) -> bool:
        return self.app_class == ONLINE

    def memory_for(self, card_memory_mib: int) -> int:
        return self.memory_mib if self.memory_mib > 0 else card_memory_mib


def _memory_mib(text: str) -> int:
    value = parse_quantity(VMEMORY, text)
    if _HAS_UNIT.search(text):
        return int(value // MIB)  # HAMi: bytes / 1024 / 1024
    if value.denominator != 1:
        raise RequestError(VMEMORY, f"a number without a unit is whole Gi, got {text!r}")
    return int(value) * 1024


def _gpu_policies(text: str | None) -> tuple[str, ...]:
    if text is None:
        return ("spread",)
    names = split_list(text)
    for name in names:
        if name not in _GPU_POLICIES:
            raise RequestError(GPU_POLICY, f"unknown policy {name!r} (allowed: {', '.join(_GPU_POLICIES)})")
    return names or ("spread",)


def parse_metax_request(request: PodRequest) -> MetaxRequest | None:
    """None when the pod asks for no MetaX card; RequestError when a value is malformed."""
    res = request.requests
    shares = optional_int(res, SGPU, low=0)
    whole = optional_int(res, GPU, low=0)
    if shares is None and (VCORE in res or VMEMORY in res):
        raise RequestError(SGPU, f"is required with {VCORE} or {VMEMORY}")
    if shares and whole:
        raise RequestError(GPU, f"cannot be combined with {SGPU} in one pod")
    if not shares and not whole:
        return None  # not a MetaX pod: its annotations are another vendor's to read
    ann = request.annotations
    policies = _gpu_policies(ann.get(GPU_POLICY))
    node_policy = node_policy_name(ann)  # checked by the plugin against the engine's policies
    use_uuids = split_list(ann.get(USE_UUID, ""))
    nouse_uuids = split_list(ann.get(NOUSE_UUID, ""))
    if whole:
        return MetaxRequest(
            vendor=Vendor.METAX,
            resource=GPU,
            count=whole,
            node_policy=node_policy,
            device_noun=METAX.device_noun,
            kind=MetaxKind.GPU,
            use_uuids=use_uuids,
            nouse_uuids=nouse_uuids,
            mutex="mutex" in policies,
            binpack_cards="binpack" in policies,
        )
    if not shares:
        return None
    cores = optional_int(res, VCORE, low=0, high=EXCLUSIVE_CORES)
    memory = _memory_mib(res[VMEMORY]) if VMEMORY in res else 0
    app_class = ann.get(APP_CLASS_ANNOTATION, "")
    if APP_CLASS_ANNOTATION in ann:
        if app_class not in APP_CLASSES:
            raise RequestError(APP_CLASS_ANNOTATION, f"must be online or offline, got {app_class!r}")
        if shares != 1:
            raise RequestError(APP_CLASS_ANNOTATION, f"an {app_class} pod must request exactly 1 {SGPU}, got {shares}")
    qos = ""
    if app_class != ONLINE:
        qos = ann.get(QOS_ANNOTATION, DEFAULT_QOS)  # HAMi's webhook writes best-effort when absent
        if qos not in QOS_POLICIES:
            raise RequestError(QOS_ANNOTATION, f"must be one of {', '.join(QOS_POLICIES)}, got {qos!r}")
    topology = parse_bool(TOPOLOGY_AWARE, ann[TOPOLOGY_AWARE]) if TOPOLOGY_AWARE in ann else None
    return MetaxRequest(
        vendor=Vendor.METAX,
        resource=SGPU,
        count=shares,
        node_policy=node_policy,
        device_noun=METAX.device_noun,
        kind=MetaxKind.SGPU,
        memory_mib=memory,
        cores=EXCLUSIVE_CORES if cores is None else cores,
        qos=qos,
        app_class=app_class,
        topology_aware=topology,
        use_uuids=use_uuids,
        nouse_uuids=nouse_uuids,
        mutex="mutex" in policies,
        binpack_cards="binpack" in policies,
    )
