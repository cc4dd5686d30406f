"""AWS Neuron device and NeuronCore selection, as pure functions over device indices.

HAMi's rules (pkg/device/awsneuron/device.go, graphSelect /
continuousDeviceAvailable / GenerateResourceRequests):

- the instance type comes from the node label node.kubernetes.io/instance-type;
- Inferentia (inf1, inf2): a multi-device pod takes any window of
  consecutive free devices; the devices form a ring but the window never
  wraps around from the last device to the first;
- Trainium (trn1, trn1n, trn2): only 1, 4, 8 or 16 devices, as a block
  aligned on its own size (devices 0-3, 4-7, ...); any other count is
  unschedulable;
- NeuronCores (``aws.amazon.com/neuroncore``): 1 core -> one device with a
  free core; 2 -> one device with 2 free cores; an even N > 2 -> N/2 whole
  devices, chosen like a device request of N/2.

Where we differ on purpose (see docs/vendors-metax-neuron.md):

- an odd N > 2 is served with N contiguous cores across adjacent devices
  (HAMi floored N/2 silently in older releases and rejects it in v2.7);
- the rules read each device's own ``index``, never its position in a
  sorted list (HAMi's graphSelect matched list positions against indices);
- the rules are written for any cores-per-device ``c`` (2 on trn1/inf2, 4
  on inf1 and on trn2 with its default logical-core setting): N <= c -> one
  device, N a multiple of c -> N/c whole devices, otherwise a run.

Cores on a device are numbered 0..c-1 and a pod's cores are counted, not
named (DeviceAssignment.cores); the engine keeps a device's held cores at
its low end, so a device's free cores are always its top ones. A run across
devices therefore takes the free top of its first device, then whole free
devices, and ends at the bottom of a whole free device.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from types import MappingProxyType

import msgspec

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
TRAINIUM_BLOCK_SIZES = (1, 4, 8, 16)

# NeuronCores per Neuron device by instance generation (AWS Neuron architecture docs:
# Inferentia 4, Inferentia2 2, Trainium 2, Trainium2 8 physical = 4 logical at the default LNC=2).
CORES_PER_DEVICE = MappingProxyType({"inf1": 4, "inf2": 2, "trn1": 2, "trn1n": 2, "trn2": 4, "trn2u": 4})


class Family(enum.StrEnum):
    INFERENTIA = "inferentia"  # any window of consecutive devices
    TRAINIUM = "trainium"  # aligned blocks of 1, 4, 8 or 16


def generation(instance_type: str) -> str:
    """'trn1.32xlarge' -> 'trn1'."""
    return instance_type.split(".", 1)[0].strip().lower()


def family_of(instance_type: str) -> Family | None:
    gen = generation(instance_type)
    if gen.startswith("inf"):
        return Family.INFERENTIA
    if gen.startswith("trn"):
        return Family.TRAINIUM
    return None


def hami_family_of(instance_type: str) -> Family:
    """HAMi: a type containing "inf" is Inferentia, anything else follows the Trainium rule."""
    return Family.INFERENTIA if "inf" in instance_type.lower() else Family.TRAINIUM


class NeuronDevice(msgspec.Struct, frozen=True, kw_only=True):
    """One Neuron device's state for a decision."""

    index: int
    cores: int  # NeuronCores on the device
    used_cores: int = 0  # cores held by pods (at the device's low end)
    held: bool = False  # any pod holds part of it
    healthy: bool = True
    eligible: bool = True  # passed the pod's device filters (uuid pins, ...)

    @property
    def free_cores(self) -> int:
        if not (self.healthy and self.eligible):
            return 0
        return max(0, self.cores - self.used_cores)

    @property
    def whole_free(self) -> bool:
        return self.healthy and self.eligible and not self.held and self.used_cores == 0


class Take(msgspec.Struct, frozen=True):
    """Cores taken on one device (all of them for a whole-device request)."""

    index: int
    cores: int


class Option(msgspec.Struct, frozen=True):
    """One legal way to serve the request: the devices in index order."""

    takes: tuple[Take, ...]

    @property
    def indices(self) -> tuple[int, ...]:
        return tuple(take.index for take in self.takes)


class NoFit(msgspec.Struct, frozen=True):
    """Why the node cannot serve the request, in words a user understands."""

    reason: str


def _by_index(devices: Sequence[NeuronDevice]) -> dict[int, NeuronDevice]:
    return {device.index: device for device in devices}


def _runs(indices: Sequence[int]) -> list[tuple[int, int]]:
    """Maximal runs of consecutive indices as (start, length), ascending."""
    runs: list[tuple[int, int]] = []
    for index in sorted(indices):
        if runs and runs[-1][0] + runs[-1][1] == index:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((index, 1))
    return runs


def _describe_runs(indices: Sequence[int]) -> str:
    parts = [str(s) if n == 1 else f"{s}-{s + n - 1}" for s, n in _runs(indices)]
    return ", ".join(parts) if parts else "none"


def device_groups(family: Family, devices: Sequence[NeuronDevice], count: int) -> list[tuple[int, ...]] | NoFit:
    """Every legal group of ``count`` whole free devices, ascending by first index."""
    if count <= 0:
        return NoFit(f"{count} Neuron devices requested")
    if count > len(devices):
        # Bounded before any work: the groups below are built in proportion to `count`.
        return NoFit(f"{count} Neuron devices requested, the node has {len(devices)}")
    if family is Family.TRAINIUM and count not in TRAINIUM_BLOCK_SIZES:
        return NoFit(
            f"Trainium nodes take 1, 4, 8 or 16 Neuron devices per pod, as an aligned block; {count} were requested"
        )
    by_index = _by_index(devices)
    free = sorted(i for i, d in by_index.items() if d.whole_free)
    free_set = set(free)
    groups: list[tuple[int, ...]] = []
    if family is Family.INFERENTIA:
        for start in free:
            window = tuple(range(start, start + count))
            if all(i in free_set for i in window):
                groups.append(window)
        if not groups:
            longest = max((n for _s, n in _runs(free)), default=0)
            return NoFit(
                f"{count} consecutive free Neuron devices needed (no wrap-around), the longest free run is "
                f"{longest} (free devices: {_describe_runs(free)})"
            )
        return groups
    for start in free:
        if start % count:
            continue
        block = tuple(range(start, start + count))
        if all(i in free_set for i in block):
            groups.append(block)
    if not groups:
        return NoFit(
            f"no free aligned block of {count} Neuron device(s) (blocks start at multiples of {count}; "
            f"free devices: {_describe_runs(free)})"
        )
    return groups


def uniform_cores(devices: Sequence[NeuronDevice]) -> int | NoFit:
    counts = sorted({d.cores for d in devices})
    if not counts:
        return NoFit("the node reports no Neuron devices")
    if len(counts) > 1 or counts[0] <= 0:
        return NoFit(f"the node's Neuron devices report different NeuronCore counts: {counts}")
    return counts[0]


def core_options(family: Family, devices: Sequence[NeuronDevice], cores: int) -> list[Option] | NoFit:
    """Every legal way to give ``cores`` NeuronCores, ascending by first device index."""
    if cores <= 0:
        return NoFit(f"{cores} NeuronCores requested")
    per_device = uniform_cores(devices)
    if isinstance(per_device, NoFit):
        return per_device
    if cores > per_device * len(devices):
        return NoFit(f"{cores} NeuronCores requested, the node has {per_device * len(devices)}")
    by_index = _by_index(devices)
    if cores <= per_device:
        options = [Option((Take(i, cores),)) for i in sorted(by_index) if by_index[i].free_cores >= cores]
        if not options:
            best = max((d.free_cores for d in devices), default=0)
            return NoFit(f"no Neuron device has {cores} free NeuronCore(s); the most any device has is {best}")
        return options
    if cores % per_device == 0:
        groups = device_groups(family, devices, cores // per_device)
        if isinstance(groups, NoFit):
            return NoFit(
                f"{cores} NeuronCores = {cores // per_device} whole devices of {per_device} cores: {groups.reason}"
            )
        return [Option(tuple(Take(i, per_device) for i in group)) for group in groups]
    return _core_runs(family, by_index, cores, per_device)


def _core_runs(family: Family, by_index: dict[int, NeuronDevice], cores: int, per_device: int) -> list[Option] | NoFit:
    options: list[Option] = []
    illegal_block = False
    for start in sorted(by_index):
        first = by_index[start]
        if first.free_cores == 0:
            continue
        takes = [Take(start, first.free_cores)]
        left = cores - first.free_cores
        index = start
        while left > 0:
            index += 1
            device = by_index.get(index)
            if device is None or not device.whole_free:
                break
            take = min(per_device, left)
            takes.append(Take(index, take))
            left -= take
        if left > 0:
            continue
        touched = [t.index for t in takes]
        if family is Family.TRAINIUM and not _inside_trainium_block(touched):
            illegal_block = True
            continue
        options.append(Option(tuple(takes)))
    if not options:
        why = f"no run of {cores} contiguous free NeuronCores across adjacent Neuron devices"
        if illegal_block:
            why += " inside one aligned Trainium block of 4, 8 or 16 devices"
        return NoFit(why)
    return options


def _inside_trainium_block(indices: Sequence[int]) -> bool:
    """True when the devices lie in one aligned block of the smallest legal size that holds them."""
    size = next((s for s in TRAINIUM_BLOCK_SIZES if s >= len(indices)), None)
    if size is None:
        return False
    return min(indices) // size == max(indices) // size


# --- choosing among legal options -------------------------------------------------------------


def remainder_health(family: Family, free_after: Sequence[int]) -> tuple[int, ...]:
    """How useful the whole free devices left behind are (compare as tuples, higher is better).

    Trainium: free aligned blocks of 16, 8, 4 devices, then free devices.
    Inferentia: free run lengths, longest first.
    """
    free_set = set(free_after)
    if family is Family.TRAINIUM:
        counts: list[int] = []
        for size in (16, 8, 4):
            starts = {i - i % size for i in free_set}
            counts.append(sum(1 for s in starts if all(s + k in free_set for k in range(size))))
        return (*counts, len(free_set))
    return tuple(sorted((n for _s, n in _runs(free_after)), reverse=True))


def choose(family: Family, devices: Sequence[NeuronDevice], options: Sequence[Option]) -> Option:
    """The default mode: the option that leaves the healthiest free devices behind.

    Then the fewest cores stranded on the devices it touches (best fit),
    then the lowest first index.
    """
    by_index = _by_index(devices)
    whole_free = {i for i, d in by_index.items() if d.whole_free}

    def key(option: Option) -> tuple[tuple[int, ...], int, int]:
        left = sorted(whole_free - set(option.indices))
        health = remainder_health(family, left)
        stranded = sum(by_index[t.index].free_cores - t.cores for t in option.takes)
        return (tuple(-h for h in health), stranded, option.takes[0].index)

    return min(options, key=key)


def choose_hami(options: Sequence[Option], order: Sequence[int] | None = None) -> Option:
    """HAMi's pick among legal options.

    A multi-device request takes the first legal group by device index
    (graphSelect scans from the lowest). A single-device request takes the
    fitting device HAMi meets first when it walks its device list from the
    end: ``order`` is that list as device indices (index order when not given).
    """
    if any(len(option.takes) > 1 for option in options):
        return options[0]
    position = {index: at for at, index in enumerate(order)} if order is not None else None

    def rank(option: Option) -> int:
        index = option.takes[0].index
        if position is None:
            return index
        return position.get(index, -1)

    return max(options, key=rank)
