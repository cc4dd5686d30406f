"""Device-level quality on synthetic clusters of the fixture machine types.

A stated workload (1/2/4/8-device jobs with Poisson arrivals and exponential
run times) is replayed once per policy on its own copy of the cluster. For
every multi-device decision the chosen set's link score is compared with the
exhaustive optimum over the free devices of the same node at that moment
(100 % = optimal). At the end of the arrivals the replay counts how many 8- and
4-device jobs still fit on a set as good as an empty node's best ("clean").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import msgspec
import numpy as np

from bench.device_baselines import first_fit, gpuallocator_best_effort, hami_v27
from bench.job_speed import COMM_HEAVY_SHARE, throughput_factor
from bench.links import PairTable, best_set, link_class, optimum
from engine import Allocation, Engine, Mode, NodeState, PodRequest
from schemas.events import HyperNodeEvent, HyperNodeMember, MemberKind
from schemas.topology import Vendor
from services.collector.node.topology_files import fixture_node_annotations, fixture_node_labels, load_topology

MACHINE_TYPES = (
    "dgx-h100",
    "dgx1-v100",
    "pcie-8gpu-2socket",
    "pcie-4gpu",
    "metax-8gpu-2zone",
    "trn1.32xlarge",
    "inf2.48xlarge",
)
RESOURCE = {Vendor.NVIDIA: "nvidia.com/gpu", Vendor.METAX: "metax-tech.com/gpu", Vendor.NEURON: "aws.amazon.com/neuron"}
SIZE_MIX = {1: 0.40, 2: 0.25, 4: 0.20, 8: 0.15}
NEURON_SIZES = (1, 4, 8)  # trn1 takes 1, 4, 8 or 16 Neuron devices; 2 is remapped to 4


class Job(msgspec.Struct, frozen=True, kw_only=True):
    uid: str
    vendor: Vendor
    devices: int
    arrival: float
    duration: float
    comm_heavy: bool


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    policy: str
    machine_type: str
    devices: int
    score: int
    optimum: int
    link: str
    seconds: float

    @property
    def quality_pct(self) -> float:
        return 100.0 if self.optimum <= 0 else 100.0 * self.score / self.optimum


class DevicePolicyResult(msgspec.Struct, frozen=True, kw_only=True):
    policy: str
    decisions: tuple[Decision, ...]
    placed: int
    unplaced: int
    clean_sets_8: int
    clean_sets_4: int
    modelled_throughput: float  # device-weighted mean factor over placed multi-device jobs (1.0 = every set perfect)
    seconds: float


@dataclass
class SimNode:
    name: str
    fixture: str
    vendor: Vendor
    state: NodeState  # the node with no allocations
    table: PairTable
    holders: dict[int, str] = field(default_factory=dict)  # position -> job uid
    version: int = 0  # moved on at every change of `holders`: what the placer's view hears as a node event
    _built: tuple[int, NodeState] | None = None  # the last state built, and the version it was built at

    def free(self) -> list[int]:
        return [p for p in range(self.table.size) if p not in self.holders]

    def take(self, positions: Sequence[int], uid: str) -> None:
        for p in positions:
            self.holders[p] = uid
        self.version += 1

    def release(self, positions: Sequence[int]) -> None:
        for p in positions:
            del self.holders[p]
        self.version += 1

    def snapshot_state(self) -> NodeState:
        """The node with its allocations; the same object while it is unchanged (as in the placer's view)."""
        if self._built is not None and self._built[0] == self.version:
            return self._built[1]
        held = sorted(self.holders.items())
        allocs = tuple(Allocation(pod_uid=uid, index=self.table.indices[p]) for p, uid in held)
        state = msgspec.structs.replace(self.state, allocations=allocs)
        self._built = (self.version, state)
        return state


def build_cluster(per_type: int) -> tuple[list[SimNode], tuple[HyperNodeEvent, ...]]:
    """`per_type` nodes of every fixture machine type, under ToRs of 4 nodes, spines of 2 ToRs, one root."""
    nodes: list[SimNode] = []
    for fixture in MACHINE_TYPES:
        for i in range(per_type):
            name = f"{fixture}-{i:02d}"
            topo = load_topology(fixture, node=name)
            state = NodeState(
                name=name,
                machine_type=topo.machine_type,
                devices=topo.devices,
                links=topo.links,
                labels=fixture_node_labels(fixture),
                annotations=fixture_node_annotations(fixture, node=name),
            )
            nodes.append(
                SimNode(
                    name=name,
                    fixture=fixture,
                    vendor=topo.devices[0].vendor,
                    state=state,
                    table=PairTable([d.index for d in topo.devices], topo.links, [d.numa_node for d in topo.devices]),
                )
            )
    tors = [nodes[i : i + 4] for i in range(0, len(nodes), 4)]
    hyper: list[HyperNodeEvent] = []
    for t, members in enumerate(tors):
        hyper.append(
            HyperNodeEvent(
                name=f"tor-{t}",
                tier=1,
                members=tuple(HyperNodeMember(kind=MemberKind.NODE, name=n.name) for n in members),
            )
        )
    spines = [list(range(s, min(s + 2, len(tors)))) for s in range(0, len(tors), 2)]
    for s, group in enumerate(spines):
        hyper.append(
            HyperNodeEvent(
                name=f"spine-{s}",
                tier=2,
                members=tuple(HyperNodeMember(kind=MemberKind.HYPERNODE, name=f"tor-{t}") for t in group),
            )
        )
    if len(spines) > 1:
        hyper.append(
            HyperNodeEvent(
                name="root",
                tier=3,
                members=tuple(
                    HyperNodeMember(kind=MemberKind.HYPERNODE, name=f"spine-{s}") for s in range(len(spines))
                ),
            )
        )
    return nodes, tuple(hyper)


def workload(nodes: Sequence[SimNode], jobs: int, seed: int, load: float = 0.9) -> list[Job]:
    """Jobs per vendor in proportion to its devices; arrival rate set so the offered load is `load` x devices."""
    rng = np.random.default_rng(seed)
    devices_by_vendor = {v: sum(n.table.size for n in nodes if n.vendor is v) for v in Vendor}
    vendors = [v for v in Vendor if devices_by_vendor[v]]
    weights = np.array([devices_by_vendor[v] for v in vendors], dtype=float)
    weights /= weights.sum()
    sizes = list(SIZE_MIX)
    size_p = np.array(list(SIZE_MIX.values()))
    mean_size = float((np.array(sizes) * size_p).sum())
    mean_duration = 100.0
    total = sum(devices_by_vendor.values())
    rate = load * total / (mean_size * mean_duration)
    out: list[Job] = []
    t = 0.0
    for j in range(jobs):
        t += float(rng.exponential(1.0 / rate))
        vendor = vendors[int(rng.choice(len(vendors), p=weights))]
        k = int(rng.choice(sizes, p=size_p))
        if vendor is Vendor.NEURON and k not in NEURON_SIZES:
            k = 4
        out.append(
            Job(
                uid=f"job-{j:05d}",
                vendor=vendor,
                devices=k,
                arrival=t,
                duration=float(rng.exponential(mean_duration)),
                comm_heavy=bool(rng.random() < COMM_HEAVY_SHARE),
            )
        )
    return out


# A node-level policy: given the cluster and the job, return (node, device positions) or None.
NodeChooser = Callable[
    [list[SimNode], tuple[HyperNodeEvent, ...], Job, np.random.Generator], tuple[SimNode, tuple[int, ...]] | None
]


# HAMi picks NVIDIA GPUs by their links only under its topology-aware GPU policy (its default,
# spread, ignores links); the HAMi figures are for that policy, which is what HAMi offers for this.
HAMI_TOPOLOGY_AWARE = {"hami.io/gpu-scheduler-policy": "topology-aware"}


def engine_request(job: Job, mode: Mode) -> PodRequest:
    annotations = HAMI_TOPOLOGY_AWARE if mode is Mode.HAMI and job.vendor is Vendor.NVIDIA else {}
    return PodRequest(uid=job.uid, requests={RESOURCE[job.vendor]: str(job.devices)}, annotations=dict(annotations))


def engine_chooser(mode: Mode) -> NodeChooser:
    """The engine as the placer runs it: one long-lived index of the cluster, a node re-read only when its
    allocations change (an unchanged node is the same object, which the index skips by identity), and one
    `place_in` per job. One engine per replay: its memo tables carry over between jobs."""
    placer = Engine()
    index = placer.new_index()
    seen: dict[str, int] = {}  # node -> the version the index holds

    def choose(
        nodes: list[SimNode], hyper: tuple[HyperNodeEvent, ...], job: Job, rng: np.random.Generator
    ) -> tuple[SimNode, tuple[int, ...]] | None:
        for n in nodes:
            if seen.get(n.name) != n.version:  # the node events since the last decision
                index.upsert(n.snapshot_state())
                seen[n.name] = n.version
        decision = placer.place_in(index, engine_request(job, mode), mode)
        if decision.node is None:
            return None
        node = next(n for n in nodes if n.name == decision.node)
        position = {d: i for i, d in enumerate(node.table.indices)}
        return node, tuple(position[a.index] for a in decision.devices)

    return choose


def _fitting(nodes: list[SimNode], job: Job) -> list[SimNode]:
    return [n for n in nodes if n.vendor is job.vendor and len(n.free()) >= job.devices]


_HAMI_ENGINE = engine_chooser(Mode.HAMI)  # one engine for HAMi's MetaX and Neuron picks, kept like topoplace's


def hami_chooser(
    nodes: list[SimNode], hyper: tuple[HyperNodeEvent, ...], job: Job, rng: np.random.Generator
) -> tuple[SimNode, tuple[int, ...]] | None:
    """HAMi v2.7: node by its default binpack policy (most used devices first, then name);
    NVIDIA devices by the reimplemented topology-aware rule; MetaX and Neuron as the engine's HAMi mode
    (the issue asks for those rules "as in the engine's compatibility mode")."""
    if job.vendor is not Vendor.NVIDIA:
        return _HAMI_ENGINE(nodes, hyper, job, rng)
    fitting = _fitting(nodes, job)
    if not fitting:
        return None
    node = min(fitting, key=lambda n: (-len(n.holders) / n.table.size, n.name))
    return node, hami_v27(node.table, node.free(), job.devices)


def _default_scheduler_node(nodes: list[SimNode], job: Job, rng: np.random.Generator) -> SimNode | None:
    """kube-scheduler's default scoring looks at CPU and memory only, so GPU nodes tie: a random fitting node."""
    fitting = _fitting(nodes, job)
    if not fitting:
        return None
    return fitting[int(rng.integers(len(fitting)))]


def gpuallocator_chooser(
    nodes: list[SimNode], hyper: tuple[HyperNodeEvent, ...], job: Job, rng: np.random.Generator
) -> tuple[SimNode, tuple[int, ...]] | None:
    node = _default_scheduler_node(nodes, job, rng)
    if node is None:
        return None
    pick = gpuallocator_best_effort if job.vendor is Vendor.NVIDIA else first_fit
    return node, pick(node.table, node.free(), job.devices)


def first_fit_chooser(
    nodes: list[SimNode], hyper: tuple[HyperNodeEvent, ...], job: Job, rng: np.random.Generator
) -> tuple[SimNode, tuple[int, ...]] | None:
    node = _default_scheduler_node(nodes, job, rng)
    if node is None:
        return None
    return node, first_fit(node.table, node.free(), job.devices)


DEVICE_POLICIES: dict[str, NodeChooser] = {
    "topoplace": engine_chooser(Mode.DEFAULT),
    "topoplace-hami": engine_chooser(Mode.HAMI),
    "hami-v2.7": hami_chooser,
    "go-gpuallocator": gpuallocator_chooser,
    "first-fit": first_fit_chooser,
}


def clean_sets(nodes: Sequence[SimNode], k: int) -> int:
    """Disjoint free k-sets (greedy) whose score equals the best k-set of the same node when empty."""
    count = 0
    for node in nodes:
        if node.table.size < k:
            continue
        best_empty = optimum(node.table, range(node.table.size), k)
        free = node.free()
        while len(free) >= k and optimum(node.table, free, k) == best_empty:
            chosen = best_set(node.table, free, k)
            free = [p for p in free if p not in chosen]
            count += 1
    return count


def run_policy(name: str, chooser: NodeChooser, jobs: Sequence[Job], per_type: int, seed: int) -> DevicePolicyResult:
    nodes, hyper = build_cluster(per_type)
    rng = np.random.default_rng(seed)
    running: list[tuple[float, SimNode, tuple[int, ...]]] = []
    decisions: list[Decision] = []
    placed = unplaced = 0
    weighted = 0.0
    weight = 0
    start = time.perf_counter()
    for job in jobs:
        still = []
        for end, node, positions in running:
            if end <= job.arrival:
                node.release(positions)
            else:
                still.append((end, node, positions))
        running = still
        t0 = time.perf_counter()
        choice = chooser(nodes, hyper, job, rng)
        elapsed = time.perf_counter() - t0
        if choice is None:
            unplaced += 1
            continue
        node, positions = choice
        if len(positions) != job.devices or any(p in node.holders for p in positions):
            raise RuntimeError(
                f"{name} gave job {job.uid} devices {positions} on {node.name}, not {job.devices} free ones"
            )
        if job.devices >= 2:
            best = optimum(node.table, node.free(), job.devices)
            cls = link_class(node.table, positions)
            decisions.append(
                Decision(
                    policy=name,
                    machine_type=node.fixture,
                    devices=job.devices,
                    score=node.table.set_score(positions),
                    optimum=best,
                    link=cls.value,
                    seconds=elapsed,
                )
            )
            weighted += job.devices * throughput_factor(cls, job.comm_heavy)
            weight += job.devices
        node.take(positions, job.uid)
        running.append((job.arrival + job.duration, node, positions))
        placed += 1
    return DevicePolicyResult(
        policy=name,
        decisions=tuple(decisions),
        placed=placed,
        unplaced=unplaced,
        clean_sets_8=clean_sets(nodes, 8),
        clean_sets_4=clean_sets(nodes, 4),
        modelled_throughput=weighted / weight if weight else 1.0,
        seconds=time.perf_counter() - start,
    )


def run_all(per_type: int, jobs: int, seed: int) -> list[DevicePolicyResult]:
    nodes, _ = build_cluster(per_type)
    sequence = workload(nodes, jobs, seed)
    return [run_policy(name, chooser, sequence, per_type, seed) for name, chooser in DEVICE_POLICIES.items()]
