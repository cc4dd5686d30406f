"""MetaX cards: sGPU shares (metax-tech.com/sgpu) and whole cards (metax-tech.com/gpu).

The rules live in small modules, this one wires them to the vendor contract:

    request.py  resources and annotations -> MetaxRequest
    qos.py      QoS pools and online/offline application classes
    zones.py    MetaXLink zones: exclusive choice, 10 x allocated - loss
    gpu.py      whole-card node preference from the node annotations

Node score (higher = better, see docs/vendors-metax-neuron.md):
- default mode: the topology term first (for an exclusive sGPU request
  10 x allocated - loss, unless the pod sets
  metax-tech.com/sgpu-topology-aware=false; for an online pod HAMi's
  online-card penalty; for whole cards the annotation preference), plus a
  node-policy fill term in [0, 1] that only breaks ties between equal
  topology terms;
- hami mode: HAMi's node usage (binpack: higher, spread: lower preferred)
  plus HAMi's vendor term (10000 x the sGPU topology or online score, only
  when topology-aware is switched on by the pod; whole cards: 2000 - loss /
  score of the policy's annotation, nothing when it is missing).
"""

from __future__ import annotations

from engine.core.model import Mode, PodRequest
from engine.node.registry import VendorContext
from engine.node.vendor import (
    DeviceRequest,
    NodePolicy,
    NodeScore,
    NodeScratch,
    SetCandidate,
    SetChoice,
    Unfit,
)
from engine.node.vendors.metax import gpu as metax_gpu
from engine.node.vendors.metax.qos import (
    EXCLUSIVE_CORES,
    OFFLINE,
    ONLINE,
    app_class_accepts,
    card_qos,
    online_card_score,
    online_preference,
    qos_accepts,
)
from engine.node.vendors.metax.request import (
    NOUSE_UUID,
    USE_UUID,
    VCORE,
    VMEMORY,
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

HAMI_VENDOR_WEIGHT = 10000  # HAMi's sGPU ScoreNode weight
HAMI_WEIGHT = 10  # HAMi's util.Weight in its usage scores


class MetaxPlugin:
    vendor = Vendor.METAX
    name = "metax"
    share_resources = (VCORE, VMEMORY)
    node_annotations_read = (metax_gpu.LOSSES_ANNOTATION, metax_gpu.SCORES_ANNOTATION)

    def __init__(self, context: VendorContext) -> None:
        """Made once per engine; nothing of this vendor is memoised beyond the engine's node answers."""
        self.context = context

    def parse_request(self, request: PodRequest) -> MetaxRequest | None:
        return parse_metax_request(request)

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
            chosen = _default_pick(scratch, request, candidates, idle)
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

    # --- node score ---------------------------------------------------------------------

    def node_score(self, scratch: NodeScratch, request: DeviceRequest, choice: SetChoice) -> NodeScore:
        assert isinstance(request, MetaxRequest)
        chosen = tuple(scratch.devices[i] for i in choice.devices)
        if scratch.mode is Mode.HAMI:
            return _hami_node_score(scratch, request, chosen)
        topology, parts = _topology_term(scratch, request, chosen, hami=False)
        fill = fill_after(scratch, request, choice)
        policy_fill = fill if request.node_policy is NodePolicy.BINPACK else 1.0 - fill
        parts["fill"] = round(policy_fill, 6)
        return NodeScore(score=round(topology + policy_fill, 6), parts=parts)


# --- helpers ---------------------------------------------------------------------------------


def idle_cards(scratch: NodeScratch) -> tuple[Device, ...]:
    return tuple(scratch.devices[i] for i in scratch.idle_indices(Vendor.METAX))


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
    scratch: NodeScratch, request: MetaxRequest, candidates: tuple[Device, ...], idle: tuple[Device, ...]
) -> tuple[Device, ...]:
    n = request.count
    if request.online:
        ranked = sorted(candidates, key=lambda d: (online_preference(scratch.loads[d.index].app_classes), d.index))
        return tuple(ranked[:n])
    if request.exclusive:
        return best_exclusive_choice(candidates, n, idle)
    # Shares: binpack fills the busiest cards first, spread (HAMi's default) the quietest.
    sign = -1.0 if request.binpack_cards else 1.0
    ranked = sorted(candidates, key=lambda d: (sign * _usage(scratch, d), d.index))
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


def _topology_enabled(request: MetaxRequest, hami: bool) -> bool:
    if request.kind is not MetaxKind.SGPU or not request.exclusive:
        return False
    if request.topology_aware is not None:
        return request.topology_aware
    return not hami  # HAMi's sgpuTopologyAware config defaults to off; ours is on


def _topology_term(
    scratch: NodeScratch, request: MetaxRequest, chosen: tuple[Device, ...], *, hami: bool
) -> tuple[float, dict[str, float]]:
    """The vendor term on the higher-is-better scale, and its named parts."""
    if request.kind is MetaxKind.GPU:
        size = request.count
        policy = request.node_policy.value
        pref = (
            metax_gpu.hami_preference(scratch.node.annotations, size, policy)
            if hami
            else metax_gpu.preference(scratch.node.annotations, size, policy)
        )
        if pref.warning:
            scratch.warn(pref.warning)
        return pref.value, {"topology_preference": pref.value}
    if request.online:
        penalty = float(sum(online_card_score(scratch.loads[d.index].app_classes) for d in chosen))
        return penalty, {"online_penalty": penalty}
    if not _topology_enabled(request, hami):
        return 0.0, {}
    zones = zone_node_score(chosen, idle_cards(scratch))
    return float(zones.node_score), {
        "topology": float(zones.node_score),
        "allocated_score": float(zones.allocated),
        "loss": float(zones.loss),
    }


def fill_after(scratch: NodeScratch, request: MetaxRequest, choice: SetChoice) -> float:
    """Mean share of each healthy card in use after the placement (max of memory and compute)."""
    cards = [d for d in scratch.devices.values() if d.vendor is Vendor.METAX and d.healthy]
    if not cards:
        return 0.0
    chosen = {a.index for a in choice.assignments}
    total = 0.0
    for card in cards:
        load = scratch.loads[card.index]
        memory, cores = load.memory_used_mib, load.cores_used
        if card.index in chosen:
            memory += request.memory_for(card.memory_mib) if request.kind is MetaxKind.SGPU else card.memory_mib
            cores += 0 if request.online else (request.cores if request.kind is MetaxKind.SGPU else 100)
        share = max(memory / card.memory_mib if card.memory_mib else 0.0, cores / card.cores if card.cores else 0.0)
        total += min(1.0, share)
    return total / len(cards)


def _hami_node_score(scratch: NodeScratch, request: MetaxRequest, chosen: tuple[Device, ...]) -> NodeScore:
    cards = [d for d in scratch.devices.values() if d.vendor is Vendor.METAX]
    cores = sum(d.cores for d in cards)
    memory = sum(d.memory_mib for d in cards)
    used_cores = sum(scratch.loads[d.index].cores_used for d in cards)
    used_memory = sum(scratch.loads[d.index].memory_used_mib for d in cards)
    usage = HAMI_WEIGHT * ((used_cores / cores if cores else 0.0) + (used_memory / memory if memory else 0.0))
    base = usage if request.node_policy is NodePolicy.BINPACK else -usage
    term, parts = _topology_term(scratch, request, chosen, hami=True)
    weight = 1.0 if request.kind is MetaxKind.GPU else float(HAMI_VENDOR_WEIGHT)
    parts["hami_usage"] = round(usage, 6)
    return NodeScore(score=round(base + weight * term, 6), parts=parts)
