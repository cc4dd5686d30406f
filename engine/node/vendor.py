"""The vendor contract: what one accelerator family tells the shared node loop.

The engine places a pod in one loop shared by every vendor (see
`engine.place`):

    for each node (sorted by name):
        node filter (shared): ready, not cordoned, has devices of the vendor
        scratch = NodeScratch.build(node, mode)        # shared: device loads, link table
        for each device of the vendor (by index):
            reason = vendor.filter_device(scratch, request, device)   # None = usable
        choice = vendor.search(scratch, request, usable_devices)      # SetChoice | Unfit
        score  = policy.score(vendor.measures(scratch, request), choice)   # NodeScore (policy.py)
    rank fitting nodes by score (higher first, ties: node name ascending)
    explain every other node (its score, or why it cannot host the pod)

A vendor is an object with the four methods of `VendorPlugin` plus two
attributes (`vendor`, `name`). It is *registered*, not subclassed: the
package `engine/node/vendors/<vendor>/` exports `Plugin`, its plugin class,
made once per engine with the engine's `VendorContext` (memo, node keys,
limits: where a vendor keeps what it memoises), and
`engine/node/vendors/__init__.py` lists the packages in a fixed order (the
order decides which vendor reads a pod that asks for two kinds of devices:
the first one that claims it). See registry.py.

Writing a vendor
----------------
1. `parse_request(request) -> DeviceRequest | None`
   Read the pod's resources and annotations. Return None when the pod asks
   for nothing of this vendor. Return your own frozen Struct *subclassing*
   `DeviceRequest` (add the fields you need: memory per device, QoS, ...).
   A malformed value raises `RequestError(field, reason)` naming the
   resource or annotation and why (e.g. field "metax-tech.com/vcore",
   reason "must be an integer between 1 and 100, got '150'").
   `count` is the number of devices the pod needs at least; the shared loop
   uses it to say "2 of 8 GPUs free, 4 requested" before calling search.
2. `filter_device(scratch, request, device) -> str | Rejection | None`
   Can this one device take (a share of) the request, by itself? None = yes;
   otherwise the reason in a user's words, e.g. "unhealthy",
   "excluded by nvidia.com/nouse-gpuuuid", "4000 MiB free, 8000 MiB requested"
   (a `Rejection` also names the class the refusal is counted under across
   nodes, e.g. "Insufficient nvidia.com/gpumem"; a plain string counts as
   "Insufficient <resource>").
   The shared loop has already dropped devices of other vendors. Unhealthy
   devices must be rejected here (`device.healthy`). Per-device load (pods,
   memory, cores, QoS and application classes already on it) is in
   `scratch.loads[device.index]`.
3. `search(scratch, request, candidates) -> SetChoice | Unfit`
   Choose the devices among `candidates` (usable devices, sorted by index).
   Return the assignments in the order the pod gets them, the internal set
   score (`set_score`, higher = better connected), the named parts of the
   score, whether the answer is proven optimal (`exact`), a few runner-up
   sets, and how many candidate sets were examined. Or `Unfit(reason,
   summary)` when no legal set exists (e.g. "trn1 takes 1, 4, 8 or 16
   devices in aligned blocks; 3 requested"). Honour `scratch.mode`
   (`Mode.HAMI` = reproduce HAMi v2.7's choice, ties included). Never
   enumerate all C(n, k) sets on large nodes: `engine.search`
   has a bounded branch-and-bound over pair scores that vendors may reuse.
   Add warnings (asymmetric links, missing data) with `scratch.warn(...)`.
4. `measures(scratch, request) -> NodeMeasures`
   What the node policies read of the node for this request (engine/node/policy.py):
   the vendor's own score terms for a choice (link quality, the remainder it
   breaks...), the node's fill after a choice, each device's free share before
   and after (FGD's measure), HAMi's usage. The policy named by
   `request.node_policy` (binpack, spread, fragmentation, ...; mode hami: HAMi's
   usage) composes the node's score from them: a vendor never branches on the
   policy, so every policy works for every vendor.

Optional: `parse_host_request(request) -> DeviceRequest | None`, for a pod that
asks for no device but whose node policy still scores nodes by their devices
(one that reads the workload: fragmentation): a request with `count` 0, which
the loop never filters or searches, only scores (with an empty choice).

`request.node_policy` is the annotation's value as written (`node_policy_name`);
`parse_request` checks it against the engine's policies (`context.policies.read`).

Everything must be deterministic: iterate tuples and sorted keys, never a
set or a dict whose order came from hashing, and break ties by a documented
rule (device index, node name).

The answer for one node must depend only on the node's state, never on its
name or on the uids of the pods holding its devices (`node.name`,
`Allocation.pod_uid`): identical nodes share one answer, computed once and
kept in the engine's bounded tables between decisions (node_key.py, memo.py). Per-node
warnings go through `scratch.warn`; the loop prefixes the node's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import msgspec

from engine.core.errors import RequestError
from engine.core.model import Allocation, Mode, NodeState, PodRequest, WorkloadClass
from schemas.events import DeviceAssignment
from schemas.topology import Device, Link, Vendor

if TYPE_CHECKING:
    from engine.node.policy import NodeMeasures

__all__ = ["RequestError"]  # re-exported: vendors raise it from here


NODE_POLICY = "hami.io/node-scheduler-policy"  # the annotation every vendor reads
DEFAULT_NODE_POLICY = "binpack"  # HAMi's default


def node_policy_name(annotations: Mapping[str, str]) -> str:
    """The pod's node policy as written (absent: binpack); the engine's policies check it (policies/registry.py)."""
    text = annotations.get(NODE_POLICY)
    return DEFAULT_NODE_POLICY if text is None else text.strip()


class DeviceRequest(msgspec.Struct, frozen=True, kw_only=True):
    """The vendor-neutral part of a parsed request. Vendors subclass it."""

    vendor: Vendor
    resource: str  # the resource named in messages, e.g. "nvidia.com/gpu"
    count: int  # devices needed at least (>= 1; 0 only for a host request, see the contract)
    node_policy: str = DEFAULT_NODE_POLICY  # the name of a registered node policy (engine/node/policies/)
    device_noun: str = "GPU"  # "GPU", "Neuron device", ... for messages
    # What the pod's allocations carry so later requests can respect them (MetaX sGPU sets them).
    qos: str = ""
    app_class: str = ""
    # Snapshot.workload, set by the node loop for a policy that reads it only (so it is part of
    # the request's key in the answer tables exactly when it can change an answer).
    workload: tuple[WorkloadClass, ...] = ()
    # The pod's milli-CPU, set with the workload when the index reads each node's CPU (None: CPU not weighed).
    cpu_milli: int | None = None

    @property
    def reads_uuids(self) -> bool:
        """Whether the answer depends on the devices' UUIDs (then nodes cannot share answers)."""
        return False


class DeviceLoad(msgspec.Struct, frozen=True, kw_only=True):
    """What is already on one device: pods, memory, cores, QoS classes."""

    index: int
    pods: int = 0
    memory_used_mib: int = 0
    cores_used: int = 0
    qos: tuple[str, ...] = ()  # QoS of the pods on it, in allocation order
    app_classes: tuple[str, ...] = ()  # MetaX online/offline class of the pods on it, likewise

    @property
    def idle(self) -> bool:
        return self.pods == 0


class SetCandidate(msgspec.Struct, frozen=True, kw_only=True):
    """A set of devices the search looked at and did not choose."""

    devices: tuple[int, ...]
    score: float
    why: str = ""


class SetChoice(msgspec.Struct, frozen=True, kw_only=True):
    """A vendor's answer for one node."""

    assignments: tuple[DeviceAssignment, ...]  # in the order the pod gets them
    set_score: float = 0.0  # internal link score of the set (higher = better connected)
    parts: dict[str, float] = {}
    exact: bool = True  # False when the search hit its work bound
    runners_up: tuple[SetCandidate, ...] = ()  # best first
    considered: int = 0  # candidate sets (or search nodes) examined

    @property
    def devices(self) -> tuple[int, ...]:
        return tuple(a.index for a in self.assignments)


class Rejection(msgspec.Struct, frozen=True, kw_only=True):
    """Why one device cannot take the request, with the class counted across nodes.

    filter_device may return a plain string instead: its class is then
    "Insufficient <resource>".
    """

    reason: str  # for this device, in a user's words
    summary: str  # e.g. "Insufficient nvidia.com/gpumem"


class Unfit(msgspec.Struct, frozen=True, kw_only=True):
    """Why a node cannot host the request."""

    reason: str  # for this node, in a user's words
    summary: str  # short class counted across nodes, e.g. "Insufficient nvidia.com/gpu"


class NodeScore(msgspec.Struct, frozen=True, kw_only=True):
    score: float
    parts: dict[str, float] = {}


@dataclass
class NodeScratch:
    """Per-node, per-decision state shared by the loop and the vendor (typed, not a dict)."""

    node: NodeState
    mode: Mode
    devices: Mapping[int, Device]  # by device index
    loads: Mapping[int, DeviceLoad]  # by device index; every device has one
    links: Mapping[tuple[int, int], Link]  # directed (src, dst)
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def build(
        cls,
        node: NodeState,
        mode: Mode,
        maps: TopologyMaps | None = None,
        loads: Mapping[int, DeviceLoad] | None = None,
    ) -> NodeScratch:
        """`maps`: the node's devices and links by index, when the caller keeps them (a twin's are equal);
        `loads`: its device loads (`device_loads`), likewise."""
        devices, links = maps if maps is not None else topology_maps(node)
        if loads is None:
            loads = device_loads(node, devices)
        return cls(node=node, mode=mode, devices=devices, loads=loads, links=links)

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def idle_indices(self, vendor: Vendor) -> tuple[int, ...]:
        """Healthy devices of the vendor with nothing on them, by index."""
        return tuple(i for i, d in self.devices.items() if d.vendor is vendor and d.healthy and self.loads[i].idle)


# Read-only (typed Mapping) and a function of the node's devices and links alone: shared by its twins.
TopologyMaps = tuple[Mapping[int, Device], Mapping[tuple[int, int], Link]]


def topology_maps(node: NodeState) -> TopologyMaps:
    devices = {d.index: d for d in sorted(node.devices, key=lambda d: d.index)}
    links = {(link.src, link.dst): link for link in node.links}
    return devices, links


def device_loads(node: NodeState, devices: Mapping[int, Device]) -> dict[int, DeviceLoad]:
    """Every device's load, in one pass over the allocations (most devices of a node hold nothing)."""
    held: dict[int, list[Allocation]] = {}
    for alloc in node.allocations:
        if alloc.index in devices:  # an allocation on a device the node no longer reports holds nothing we can give
            held.setdefault(alloc.index, []).append(alloc)
    loads: dict[int, DeviceLoad] = {}
    for i, device in devices.items():
        allocs = held.get(i)
        loads[i] = DeviceLoad(index=i) if allocs is None else _load(i, device, allocs)
    return loads


def _load(index: int, device: Device, allocs: list[Allocation]) -> DeviceLoad:
    # memory_mib 0 = the device's whole memory; cores count as given, capped at the
    # device's own (a default 100 on a 2-core Neuron device means all its cores)
    memory = sum(a.memory_mib if a.memory_mib > 0 else device.memory_mib for a in allocs)
    cores = sum(min(a.cores, device.cores) for a in allocs)
    return DeviceLoad(
        index=index,
        pods=len(allocs),
        memory_used_mib=min(memory, device.memory_mib),
        cores_used=min(cores, device.cores),
        qos=tuple(a.qos for a in allocs),
        app_classes=tuple(a.app_class for a in allocs),
    )


class VendorPlugin(Protocol):
    """One accelerator family. See the module docstring for the contract."""

    vendor: Vendor
    name: str

    def parse_request(self, request: PodRequest) -> DeviceRequest | None: ...

    def filter_device(self, scratch: NodeScratch, request: DeviceRequest, device: Device) -> str | Rejection | None: ...

    def search(
        self, scratch: NodeScratch, request: DeviceRequest, candidates: tuple[Device, ...]
    ) -> SetChoice | Unfit: ...

    def measures(self, scratch: NodeScratch, request: DeviceRequest) -> NodeMeasures: ...
