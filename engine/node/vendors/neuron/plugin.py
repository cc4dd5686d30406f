"""AWS Neuron devices (aws.amazon.com/neurondevice, or the older neuron) and NeuronCores (aws.amazon.com/neuroncore).

The rules are in rules.py (pure functions over device indices); this
module reads the request, filters devices and wires the rules to the vendor
contract. Annotations: aws.amazon.com/use-neuron-uuid and
aws.amazon.com/nouse-neuron-uuid (comma lists), hami.io/node-scheduler-policy,
hami.io/gpu-scheduler-policy (binpack | spread orders HAMi's walk).

The request is read in request.py; the node score is the request's node policy
over what measures.py measures (the fill, the damage to the largest free group,
each device's free NeuronCores, HAMi's usage).
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
from engine.node.vendors.neuron.measures import NeuronMeasures
from engine.node.vendors.neuron.request import NOUSE_UUID, USE_UUID, NeuronRequest, parse_neuron_request
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

RUNNERS_UP = 3


class NeuronPlugin:
    vendor = Vendor.NEURON
    name = "neuron"
    node_labels_read = (INSTANCE_TYPE_LABEL,)

    def __init__(self, context: VendorContext) -> None:
        """Made once per engine; nothing of this vendor is memoised beyond the engine's node answers."""
        self.context = context

    def parse_request(self, request: PodRequest) -> NeuronRequest | None:
        parsed = parse_neuron_request(request)
        if parsed is not None:
            self.context.policies.check(parsed)
        return parsed

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
            return f"in use by {load.pods} pod(s); {request.resource} takes whole idle devices"
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
            policy = self.context.policies.named(request.node_policy)
            best = _policy_best(policy, NeuronMeasures(scratch, request), options, candidates)
            chosen = choose(family, devices, best)
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

    def measures(self, scratch: NodeScratch, request: DeviceRequest) -> NeuronMeasures:
        assert isinstance(request, NeuronRequest)
        return NeuronMeasures(scratch, request)


# --- helpers ---------------------------------------------------------------------------------


def _assignment(device: Device, take: Take) -> DeviceAssignment:
    """Whole device: all memory (0) and all cores. Some cores: their share of the device memory,
    since each NeuronCore has its own slice of HBM and the ledger sums memory per device."""
    if take.cores >= device.cores or device.cores <= 0:
        return DeviceAssignment(index=device.index, uuid=device.uuid, memory_mib=0, cores=device.cores)
    memory = max(1, device.memory_mib * take.cores // device.cores)
    return DeviceAssignment(index=device.index, uuid=device.uuid, memory_mib=memory, cores=take.cores)


def _policy_best(
    policy: NodePolicy, measures: NeuronMeasures, options: list[Option], candidates: tuple[Device, ...]
) -> list[Option]:
    """The options the node policy ranks best (FGD's device step), all of them when it has no preference;
    the vendor's own rule (the remainder's health) chooses among them."""
    by_index = {d.index: d for d in candidates}
    ranks = policy.device_ranks(measures, [tuple(_assignment(by_index[t.index], t) for t in o.takes) for o in options])
    if ranks is None:
        return options
    best = min(ranks)
    return [option for option, rank in zip(options, ranks, strict=True) if rank == best]


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
        return f"Illegal {request.resource} count for Trainium ({', '.join(map(str, TRAINIUM_BLOCK_SIZES))})"
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
            why = f"same remainder (a largest free group of {theirs}); more cores stranded or a later first device"
        # Scored as the choice is: every legal group is equally connected; the remainder is in `why`.
        out.append(SetCandidate(devices=option.indices, score=0.0, why=why))
        if len(out) == RUNNERS_UP:
            break
    return tuple(out)
