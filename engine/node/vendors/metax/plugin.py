"""MetaX cards: sGPU shares (metax-tech.com/sgpu) and whole cards (metax-tech.com/gpu).

The rules live in small modules, this one wires them to the vendor contract:

    request.py  resources and annotations -> MetaxRequest
    qos.py      QoS pools and online/offline application classes
    zones.py    MetaXLink zones: exclusive choice, 10 x allocated - loss
    gpu.py      whole-card node preference from the node annotations

    measures.py what the node policies read of a node (the topology term, fill, free shares, HAMi usage)

The node score is the request's node policy over those measures (see measures.py and
docs/vendors-metax-neuron.md).
"""

from __future__ import annotations

from engine.core.model import Mode, PodRequest
from engine.node.policy import NodePolicy
from engine.node.registry import VendorContext
from engine.node.vendor import (
    DeviceRequest,
    NodeScratch,
    SetCandidate,
    SetChoice,
    Unfit,
)
from engine.node.vendors.metax import gpu as metax_gpu
from engine.node.vendors.metax.measures import MetaxMeasures, idle_cards
from engine.node.vendors.metax.qos import (
    EXCLUSIVE_CORES,
    OFFLINE,
    ONLINE,
    app_class_accepts,
    card_qos,
    online_preference,
    qos_accepts,
)
from engine.node.vendors.metax.request import (
    NOUSE_UUID,
    USE_UUID,
    MetaxKind,
    MetaxRequest,
    parse_metax_request,
)
from engine.node.vendors.metax.zones import (
    best_exclusive_choice,
    hami_exclusive_choice,
    zone_node_score,
    zone_set_score,
)
from schemas.events import DeviceAssignment
from schemas.topology import Device, Vendor
from schemas.vendors import METAX


class MetaxPlugin:
    vendor = Vendor.METAX
    name = "metax"
    share_resources = METAX.unreported  # vmemory, vcore
    node_annotations_read = (metax_gpu.LOSSES_ANNOTATION, metax_gpu.SCORES_ANNOTATION)

    def __init__(self, context: VendorContext) -> None:
        """Made once per engine; nothing of this vendor is memoised beyond the engine's node answers."""
        self.context = context

    def parse_request(self, request: PodRequest) -> MetaxRequest | None:
        parsed = parse_metax_request(request)
        if parsed is not None:
            self.context.policies.check(parsed)
        return parsed

    # --- filter -------------------------------------------------------------------------

    def filter_device(self, scratch: NodeScratch, request: DeviceRequest, device: Device) -> str | None:
        assert isinstance(request, MetaxRequest)
        if not device.healthy:
            return "unhealthy"
        load = scratch.loads[device.index]
        if request.kind is MetaxKind.GPU:
            pinned = _uuid_reason(request, device)
            if pinned:
                return pinned
            if load.pods > 0:
                return f"in use by {load.pods} pod(s); {request.resource} takes whole idle cards"
            return None
        if not app_class_accepts(load.app_classes, request.app_class):
            return _app_class_reason(load.app_classes, request.app_class)
        running = card_qos(load.qos)
        if not request.online and not qos_accepts(running, load.pods > 0, request.qos, request.cores):
            return f"runs {running} pods; the pod's QoS is {request.qos}"
        pinned = _uuid_reason(request, device)
        if pinned:
            return pinned
        if request.mutex and load.pods > 0:
            return f"in use by {load.pods} pod(s); the mutex policy needs an idle card"
        free_memory = device.memory_mib - load.memory_used_mib
        needed = request.memory_for(device.memory_mib)
        if free_memory < needed:
            return f"{free_memory} MiB free, {needed} MiB requested"
        if not request.online:
            free_cores = device.cores - load.cores_used
            if free_cores < request.cores:
                return f"{free_cores}% compute free, {request.cores}% requested"
            if request.cores == EXCLUSIVE_CORES and load.pods > 0:
                return f"in use by {load.pods} pod(s); vcore 100 needs the card alone"
            if request.cores == 0 and free_cores == 0:
                return "all compute taken"
        return None

    # --- search -------------------------------------------------------------------------

    def search(self, scratch: NodeScratch, request: DeviceRequest, candidates: tuple[Device, ...]) -> SetChoice | Unfit:
        assert isinstance(request, MetaxRequest)
        idle = idle_cards(scratch)
        if scratch.mode is Mode.HAMI:
            chosen = _hami_pick(scratch, request, candidates)
            runners: tuple[SetCandidate, ...] = ()
        else:
            policy = self.context.policies.named(request.node_policy)
            chosen = _default_pick(scratch, request, candidates, idle, policy)
            runners = _hami_runner_up(scratch, request, candidates, chosen)
        set_score = float(zone_set_score(chosen))
        parts = {"zone_score": set_score}
        if request.exclusive:
            zones = zone_node_score(chosen, idle)
            parts["loss"] = float(zones.loss)
            parts["idle_score_before"] = float(zones.idle_before)
        return SetChoice(
            assignments=tuple(_assignment(request, d) for d in chosen),
            set_score=set_score,
            parts=parts,
            runners_up=runners,
            considered=len(candidates),
        )

    # --- measures (measures.py) ---------------------------------------------------------

    def measures(self, scratch: NodeScratch, request: DeviceRequest) -> MetaxMeasures:
        assert isinstance(request, MetaxRequest)
        return MetaxMeasures(scratch, request)


# --- helpers ---------------------------------------------------------------------------------


def _uuid_reason(request: MetaxRequest, device: Device) -> str:
    if request.use_uuids and device.uuid not in request.use_uuids:
        return f"not listed in {USE_UUID}"
    if device.uuid in request.nouse_uuids:
        return f"excluded by {NOUSE_UUID}"
    return ""


def _app_class_reason(classes: tuple[str, ...], request_class: str) -> str:
    if ONLINE in classes and request_class == OFFLINE:
        return "runs an online pod; offline pods are not sent to it"
    if request_class:
        return f"runs ordinary pods; an {request_class} pod needs a card of online/offline pods or an idle one"
    return "runs online/offline pods; an ordinary pod needs another card"


def _assignment(request: MetaxRequest, device: Device) -> DeviceAssignment:
    if request.kind is MetaxKind.GPU:
        return DeviceAssignment(index=device.index, uuid=device.uuid, memory_mib=0, cores=100)
    memory = max(0, request.memory_mib)  # 0 = the whole memory
    cores = 0 if request.online else request.cores  # HAMi: online pods hold no compute share
    return DeviceAssignment(index=device.index, uuid=device.uuid, memory_mib=memory, cores=cores)


def _usage(scratch: NodeScratch, device: Device) -> float:
    load = scratch.loads[device.index]
    cores = load.cores_used / device.cores if device.cores else 0.0
    memory = load.memory_used_mib / device.memory_mib if device.memory_mib else 0.0
    return cores + memory


def hami_walk_order(scratch: NodeScratch, request: MetaxRequest) -> list[Device]:
    """HAMi's Fit order: cards sorted by usage (binpack: ascending, else descending), walked from the end.

    HAMi also counts the card's sGPU slots, which the node agent does not
    report; cores and memory order the cards the same way in practice.
    """
    cards = [d for d in scratch.devices.values() if d.vendor is Vendor.METAX]
    sign = 1.0 if request.binpack_cards else -1.0
    ordered = sorted(cards, key=lambda d: (sign * _usage(scratch, d), d.index))
    return list(reversed(ordered))


def _hami_pick(scratch: NodeScratch, request: MetaxRequest, candidates: tuple[Device, ...]) -> tuple[Device, ...]:
    usable = {d.index for d in candidates}
    walk = [d for d in hami_walk_order(scratch, request) if d.index in usable]
    n = request.count
    if len(walk) <= n:
        return tuple(walk[:n])
    if request.online:
        ranked = sorted(
            range(len(walk)),
            key=lambda at: (online_preference(scratch.loads[walk[at].index].app_classes), at),
        )
        return tuple(walk[at] for at in ranked[:n])
    if request.kind is MetaxKind.SGPU and request.exclusive:
        return hami_exclusive_choice(walk, n)
    return tuple(walk[:n])


def _default_pick(
    scratch: NodeScratch,
    request: MetaxRequest,
    candidates: tuple[Device, ...],
    idle: tuple[Device, ...],
    policy: NodePolicy,
) -> tuple[Device, ...]:
    """`policy`: the request's node policy, which may rank the cards a one-card share could take."""
    n = request.count
    if request.online:
        ranked = sorted(candidates, key=lambda d: (online_preference(scratch.loads[d.index].app_classes), d.index))
        return tuple(ranked[:n])
    if request.exclusive:
        return best_exclusive_choice(candidates, n, idle)
    # Shares: binpack fills the busiest cards first, spread (HAMi's default) the quietest.
    sign = -1.0 if request.binpack_cards else 1.0
    ranked = sorted(candidates, key=lambda d: (sign * _usage(scratch, d), d.index))
    if n == 1:
        options = [(_assignment(request, d),) for d in ranked]
        ranks = policy.device_ranks(MetaxMeasures(scratch, request), options)
        if ranks is not None:
            # The policy's device step (FGD's); among equals a card already shared before an idle one,
            # then the GPU policy's order.
            idle_indices = {d.index for d in idle}
            best = min(range(len(ranked)), key=lambda at: (ranks[at], ranked[at].index in idle_indices, at))
            return (ranked[best],)
    return tuple(sorted(ranked[:n], key=lambda d: d.index))


def _hami_runner_up(
    scratch: NodeScratch, request: MetaxRequest, candidates: tuple[Device, ...], chosen: tuple[Device, ...]
) -> tuple[SetCandidate, ...]:
    """HAMi's own pick, when it differs, with why the default mode did not take it."""
    if not request.exclusive or len(candidates) <= request.count:
        return ()
    hami = _hami_pick(scratch, request, candidates)
    mine = sorted(d.index for d in chosen)
    theirs = sorted(d.index for d in hami)
    if mine == theirs:
        return ()
    idle = idle_cards(scratch)
    ours, other = zone_node_score(chosen, idle), zone_node_score(hami, idle)
    if other.allocated < ours.allocated:
        why = f"HAMi's zone filling: zone score {other.allocated} < {ours.allocated}"
    elif other.loss > ours.loss:
        why = f"HAMi's zone filling: same zone score, loss {other.loss} > {ours.loss}"
    else:
        why = "HAMi's order: equal zone score and loss, later by the default tie rule"
    return (SetCandidate(devices=tuple(theirs), score=float(other.allocated), why=why),)
