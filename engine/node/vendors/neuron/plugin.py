"""AWS Neuron devices (aws.amazon.com/neuron) and NeuronCores (aws.amazon.com/neuroncore).

The rules are in rules.py (pure functions over device indices); this
module reads the request, filters devices and wires the rules to the vendor
contract. Annotations: aws.amazon.com/use-neuron-uuid and
aws.amazon.com/nouse-neuron-uuid (comma lists), hami.io/node-scheduler-policy,
hami.io/gpu-scheduler-policy (binpack | spread orders HAMi's walk).

Node score (higher = better): default mode
    10 x fill (binpack) or 10 x (1 - fill) (spread)  -  10 x damage,
where fill is the node's share of NeuronCores in use after the placement
and damage is how much the placement shrinks the largest legal group of
free devices (longest free run on Inferentia, largest free aligned block on
Trainium), as a share of the node's devices. HAMi mode: HAMi's usage only
(its Neuron ScoreNode is 0).
"""

from __future__ import annotations

from engine.core.model import Mode, PodRequest
from engine.core.quantities import optional_int, split_list
from engine.node.registry import VendorContext
from engine.node.vendor import (
    NODE_POLICY,
    DeviceRequest,
    NodePolicy,
    NodeScore,
    NodeScratch,
    RequestError,
    SetCandidate,
    SetChoice,
    Unfit,
    parse_node_policy,
)
from engine.node.vendors.neuron.rules import (
    CORES_PER_DEVICE,
    INSTANCE_TYPE_LABEL,
    TRAINIUM_BLOCK_SIZES,
    Family,
    NeuronDevice,
    NoFit,
    Option,
    Take,
    choose,
    choose_hami,
    core_options,
    device_groups,
    family_of,
    generation,
    hami_family_of,
    remainder_health,
)
from schemas.events import DeviceAssignment
from schemas.topology import Device, Vendor

NEURON = "aws.amazon.com/neuron"
NEURONCORE = "aws.amazon.com/neuroncore"
USE_UUID = "aws.amazon.com/use-neuron-uuid"
NOUSE_UUID = "aws.amazon.com/nouse-neuron-uuid"
GPU_POLICY = "hami.io/gpu-scheduler-policy"

HAMI_WEIGHT = 10
FILL_WEIGHT = 10.0
DAMAGE_WEIGHT = 10.0
RUNNERS_UP = 3


class NeuronRequest(DeviceRequest, frozen=True, kw_only=True):
    devices: int = 0  # whole devices (aws.amazon.com/neuron); 0 = a core request
    cores: int = 0  # NeuronCores (aws.amazon.com/neuroncore); 0 = a device request
    use_uuids: tuple[str, ...] = ()
    nouse_uuids: tuple[str, ...] = ()
    binpack_devices: bool = False

    @property
    def reads_uuids(self) -> bool:
        return bool(self.use_uuids or self.nouse_uuids)


def parse_neuron_request(request: PodRequest) -> NeuronRequest | None:
    res = request.requests
    devices = optional_int(res, NEURON, low=0)
    cores = optional_int(res, NEURONCORE, low=0)
    if devices and cores:
        raise RequestError(NEURONCORE, f"cannot be combined with {NEURON} in one pod")
    if not devices and not cores:
        return None
    ann = request.annotations
    return NeuronRequest(
        vendor=Vendor.NEURON,
        resource=NEURON if devices else NEURONCORE,
        count=devices or 1,
        # HAMi's values only: no fragmentation model for these devices yet
        node_policy=parse_node_policy(ann.get(NODE_POLICY)),
        device_noun="Neuron device",
        devices=devices or 0,
        cores=cores or 0,
        use_uuids=split_list(ann.get(USE_UUID, "")),
        nouse_uuids=split_list(ann.get(NOUSE_UUID, "")),
        binpack_devices="binpack" in split_list(ann.get(GPU_POLICY, "")),
    )


class NeuronPlugin:
    vendor = Vendor.NEURON
    name = "neuron"
    node_labels_read = (INSTANCE_TYPE_LABEL,)

    def __init__(self, context: VendorContext) -> None:
        """Made once per engine; nothing of this vendor is memoised beyond the engine's node answers."""
        self.context = context

    def parse_request(self, request: PodRequest) -> NeuronRequest | None:
        return parse_neuron_request(request)

    def filter_device(self, scratch: NodeScratch, request: DeviceRequest, device: Device) -> str | None:
        assert isinstance(request, NeuronRequest)
        if not device.healthy:
            return "unhealthy"
        if request.use_uuids and device.uuid not in request.use_uuids:
            return f"not listed in {USE_UUID}"
        if device.uuid in request.nouse_uuids:
            return f"excluded by {NOUSE_UUID}"
        load = scratch.loads[device.index]
        if request.devices and load.pods > 0:
            return f"in use by {load.pods} pod(s); {NEURON} takes whole idle devices"
        if request.cores and device.cores - load.cores_used <= 0:
            return f"all {device.cores} NeuronCores taken"
        return None

    def search(self, scratch: NodeScratch, request: DeviceRequest, candidates: tuple[Device, ...]) -> SetChoice | Unfit:
        assert isinstance(request, NeuronRequest)
        family = node_family(scratch)
        if isinstance(family, NoFit):
            return Unfit(reason=family.reason, summary="Unknown Neuron instance type")
        devices = neuron_devices(scratch, candidates)
        _check_core_counts(scratch, devices)
        options = _options(family, devices, request)
        if isinstance(options, NoFit):
            return Unfit(reason=options.reason, summary=_unfit_summary(request, options))
        if scratch.mode is Mode.HAMI:
            chosen = choose_hami(options, [d.index for d in hami_list_order(scratch, request)])
        else:
            chosen = choose(family, devices, options)
        before = largest_group(family, _whole_free(devices))
        after = largest_group(family, _whole_free(devices) - set(chosen.indices))
        by_index = {d.index: d for d in candidates}
        return SetChoice(
            assignments=tuple(_assignment(by_index[t.index], t) for t in chosen.takes),
            set_score=0.0,  # every legal group is equally connected (a ring window or an aligned block)
            parts={"largest_free_group_before": float(before), "largest_free_group_after": float(after)},
            runners_up=_runners_up(family, devices, options, chosen),
            considered=len(options),
        )

    def node_score(self, scratch: NodeScratch, request: DeviceRequest, choice: SetChoice) -> NodeScore:
        assert isinstance(request, NeuronRequest)
        devices = [d for d in scratch.devices.values() if d.vendor is Vendor.NEURON]
        total = sum(d.cores for d in devices)
        used = sum(scratch.loads[d.index].cores_used for d in devices)
        if scratch.mode is Mode.HAMI:
            usage = HAMI_WEIGHT * (used / total if total else 0.0)
            score = usage if request.node_policy is NodePolicy.BINPACK else -usage
            return NodeScore(score=round(score, 6), parts={"hami_usage": round(usage, 6)})
        taken = sum(a.cores for a in choice.assignments)
        fill = (used + taken) / total if total else 0.0
        fill_term = FILL_WEIGHT * (fill if request.node_policy is NodePolicy.BINPACK else 1.0 - fill)
        before = choice.parts.get("largest_free_group_before", 0.0)
        after = choice.parts.get("largest_free_group_after", 0.0)
        damage = DAMAGE_WEIGHT * (before - after) / len(devices) if devices else 0.0
        return NodeScore(
            score=round(fill_term - damage, 6),
            parts={"fill": round(fill_term, 6), "remainder_damage": round(-damage, 6)},
        )


# --- helpers ---------------------------------------------------------------------------------


def _assignment(device: Device, take: Take) -> DeviceAssignment:
    """Whole device: all memory (0) and all cores. Some cores: their share of the device memory,
    since each NeuronCore has its own slice of HBM and the ledger sums memory per device."""
    if take.cores >= device.cores or device.cores <= 0:
        return DeviceAssignment(index=device.index, uuid=device.uuid, memory_mib=0, cores=device.cores)
    memory = max(1, device.memory_mib * take.cores // device.cores)
    return DeviceAssignment(index=device.index, uuid=device.uuid, memory_mib=memory, cores=take.cores)


def node_family(scratch: NodeScratch) -> Family | NoFit:
    """The node's family from its instance-type label (default mode: else its machine type)."""
    label = scratch.node.labels.get(INSTANCE_TYPE_LABEL, "")
    if scratch.mode is Mode.HAMI:
        return hami_family_of(label)  # HAMi: no label reads as "", which follows the Trainium rule
    instance_type = label
    if not label:
        instance_type = scratch.node.machine_type
        scratch.warn(f"no {INSTANCE_TYPE_LABEL} label; using the machine type {instance_type!r}")
    family = family_of(instance_type)
    if family is None:
        return NoFit(
            f"instance type {instance_type!r} is neither Inferentia (inf*) nor Trainium (trn*), "
            "so its Neuron device layout is unknown"
        )
    return family


def neuron_devices(scratch: NodeScratch, candidates: tuple[Device, ...]) -> list[NeuronDevice]:
    """Every Neuron device of the node by index; those the filter rejected are not eligible."""
    usable = {d.index for d in candidates}
    return [
        NeuronDevice(
            index=d.index,
            cores=d.cores,
            used_cores=scratch.loads[d.index].cores_used,
            held=scratch.loads[d.index].pods > 0,
            healthy=d.healthy,
            eligible=d.index in usable,
        )
        for d in scratch.devices.values()
        if d.vendor is Vendor.NEURON
    ]


def _check_core_counts(scratch: NodeScratch, devices: list[NeuronDevice]) -> None:
    label = scratch.node.labels.get(INSTANCE_TYPE_LABEL, "") or scratch.node.machine_type
    expected = CORES_PER_DEVICE.get(generation(label))
    if expected is None:
        return
    odd = sorted({d.cores for d in devices if d.cores != expected})
    if odd:
        scratch.warn(
            f"{label} devices have {expected} NeuronCores each, the node reports {odd}; using the reported counts"
        )


def _options(family: Family, devices: list[NeuronDevice], request: NeuronRequest) -> list[Option] | NoFit:
    if request.cores:
        return core_options(family, devices, request.cores)
    by_index = {d.index: d for d in devices}
    groups = device_groups(family, devices, request.devices)
    if isinstance(groups, NoFit):
        return groups
    return [Option(tuple(Take(i, by_index[i].cores) for i in group)) for group in groups]


def _unfit_summary(request: NeuronRequest, why: NoFit) -> str:
    if request.devices and "Trainium nodes take" in why.reason:
        return f"Illegal {NEURON} count for Trainium ({', '.join(map(str, TRAINIUM_BLOCK_SIZES))})"
    return f"Insufficient {request.resource}"


def _whole_free(devices: list[NeuronDevice]) -> set[int]:
    return {d.index for d in devices if d.healthy and not d.held and d.used_cores == 0}


def largest_group(family: Family, free: set[int]) -> int:
    """The largest legal group of whole free devices: longest run (Inferentia), largest aligned block (Trainium)."""
    if family is Family.TRAINIUM:
        for size in sorted(TRAINIUM_BLOCK_SIZES, reverse=True):
            if any(all(s + k in free for k in range(size)) for s in sorted(free) if s % size == 0):
                return size
        return 0
    health = remainder_health(family, sorted(free))
    return health[0] if health else 0


def hami_list_order(scratch: NodeScratch, request: NeuronRequest) -> list[Device]:
    """HAMi's device list before its Fit walks it from the end: sorted by usage."""
    devices = [d for d in scratch.devices.values() if d.vendor is Vendor.NEURON]

    def usage(d: Device) -> float:
        return scratch.loads[d.index].cores_used / d.cores if d.cores else 0.0

    if request.binpack_devices:
        return sorted(devices, key=lambda d: (usage(d), d.index))
    return sorted(devices, key=lambda d: (-usage(d), d.index))


def _runners_up(
    family: Family, devices: list[NeuronDevice], options: list[Option], chosen: Option
) -> tuple[SetCandidate, ...]:
    free = _whole_free(devices)
    mine = largest_group(family, free - set(chosen.indices))
    my_health = remainder_health(family, sorted(free - set(chosen.indices)))
    out: list[SetCandidate] = []
    for option in options:
        if option == chosen:
            continue
        left = free - set(option.indices)
        theirs = largest_group(family, left)
        if theirs < mine:
            why = f"leaves a largest free group of {theirs} device(s), the chosen set leaves {mine}"
        elif remainder_health(family, sorted(left)) < my_health:
            why = "leaves the free devices more fragmented"
        else:
            why = "same remainder; more cores stranded or a later first device"
        out.append(SetCandidate(devices=option.indices, score=float(theirs), why=why))
        if len(out) == RUNNERS_UP:
            break
    return tuple(out)
