"""Fragmentation on MetaX and Neuron clusters: binpack against the fragmentation node policy.

`python -m bench.vendor_fragmentation [--seeds N]` prints the section; `bench.run` adds its figures.

Each vendor gets a generated cluster of identical nodes (MetaX: the collector's
metax-8gpu-2zone box, 8 MXC500 cards in two MetaXLink zones; Neuron: inf2.48xlarge,
12 devices of 2 NeuronCores) and a generated workload of typical pod classes
(`METAX_CLASSES`, `NEURON_CLASSES`). Pods are drawn from the classes (seeded) and
placed one by one, each a real `Engine.place_in` over the cluster, until their
arrived demand reaches the cluster's capacity; a pod that fits nowhere is dropped
(the FGD simulator's protocol). The figure is the unallocated device share at that
point: 100 - allocated / capacity, in thousandths of a device summed (MetaX: a card's
used share is the larger of its memory and compute shares; Neuron: NeuronCores).
The engine's workload for the fragmentation policy is the generated classes.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence

import msgspec

from bench.results import Figure
from engine import Allocation, Engine, NodeState, PodRequest
from engine.core.model import MILLI, WorkloadClass
from schemas.vendors import METAX, NEURON
from services.collector.node.topology_files import fixture_node_labels, load_topology

POLICIES = ("binpack", "fragmentation")
NODES = 16
SEEDS = 10
NODE_POLICY = "hami.io/node-scheduler-policy"


class PodClass(msgspec.Struct, frozen=True, kw_only=True):
    """One typical pod: what it asks, what it takes of each device, how common it is."""

    name: str
    requests: dict[str, str]
    devices: int  # devices it spreads over
    milli: int  # thousandths of each device it takes
    weight: float


def metax_share(milli: int, weight: float) -> PodClass:
    """A share of one card: `milli` thousandths of its 64 GiB of memory and of its compute."""
    requests = {METAX.shares: "1", METAX.memory_share: str(64 * milli // MILLI), METAX.compute_share: str(milli // 10)}
    return PodClass(name=f"{milli / MILLI:g} card", requests=requests, devices=1, milli=milli, weight=weight)


# Shares that do not add up to whole cards, and whole-card jobs that need idle cards.
METAX_CLASSES = (
    metax_share(300, 0.2),
    metax_share(450, 0.15),
    metax_share(600, 0.2),
    metax_share(800, 0.1),
    PodClass(name="1 card", requests={METAX.whole: "1"}, devices=1, milli=MILLI, weight=0.2),
    PodClass(name="2 cards", requests={METAX.whole: "2"}, devices=2, milli=MILLI, weight=0.1),
    PodClass(name="4 cards", requests={METAX.whole: "4"}, devices=4, milli=MILLI, weight=0.05),
)
# Single NeuronCores, three cores across two adjacent devices, and whole-device windows.
NEURON_CLASSES = (
    PodClass(name="1 NeuronCore", requests={NEURON.cores: "1"}, devices=1, milli=500, weight=0.35),
    PodClass(name="3 NeuronCores", requests={NEURON.cores: "3"}, devices=2, milli=750, weight=0.15),
    PodClass(name="1 device", requests={NEURON.whole: "1"}, devices=1, milli=MILLI, weight=0.2),
    PodClass(name="2 devices", requests={NEURON.whole: "2"}, devices=2, milli=MILLI, weight=0.15),
    PodClass(name="4 devices", requests={NEURON.whole: "4"}, devices=4, milli=MILLI, weight=0.15),
)
FIXTURES = {"metax": "metax-8gpu-2zone", "neuron": "inf2.48xlarge"}
CLASSES = {"metax": METAX_CLASSES, "neuron": NEURON_CLASSES}


class VendorRun(msgspec.Struct, frozen=True, kw_only=True):
    vendor: str
    policy: str
    seed: int
    unallocated_pct: float
    pods_dropped: int


def cluster(vendor: str, nodes: int = NODES) -> list[NodeState]:
    fixture = FIXTURES[vendor]
    out: list[NodeState] = []
    for i in range(nodes):
        name = f"{vendor}-{i:02d}"
        topology = load_topology(fixture, node=name)
        labels = fixture_node_labels(fixture)
        out.append(
            NodeState(
                name=name,
                machine_type=topology.machine_type,
                devices=topology.devices,
                links=topology.links,
                labels=labels,
            )
        )
    return out


def workload(classes: Sequence[PodClass]) -> tuple[WorkloadClass, ...]:
    return tuple(WorkloadClass(gpus=c.devices, milli=c.milli, weight=c.weight) for c in classes)


def used_milli(node: NodeState) -> int:
    """Thousandths of the node's devices in use: per device the larger of its memory and compute shares."""
    total = 0
    for device in node.devices:
        allocations = [a for a in node.allocations if a.index == device.index]
        memory = sum(a.memory_mib if a.memory_mib > 0 else device.memory_mib for a in allocations)
        cores = sum(min(a.cores, device.cores) for a in allocations)
        by_memory = memory * MILLI // device.memory_mib if device.memory_mib else 0
        by_cores = cores * MILLI // device.cores if device.cores else 0
        total += min(MILLI, max(by_memory, by_cores))
    return total


def replay(vendor: str, policy: str, seed: int, nodes: int = NODES) -> VendorRun:
    """Pods drawn from the vendor's classes until their demand reaches capacity, each placed by the engine."""
    classes = CLASSES[vendor]
    states = {n.name: n for n in cluster(vendor, nodes)}
    capacity = sum(len(n.devices) for n in states.values()) * MILLI
    engine = Engine()
    index = engine.new_index()
    for state in states.values():
        index.upsert(state)
    mix = workload(classes) if policy == "fragmentation" else ()
    rng = random.Random(seed)
    demand, dropped, count = 0, 0, 0
    while demand < capacity:
        pod_class = rng.choices(classes, weights=[c.weight for c in classes])[0]
        count += 1
        demand += pod_class.devices * pod_class.milli
        request = PodRequest(
            uid=f"p{count}", name=f"p{count}", requests=pod_class.requests, annotations={NODE_POLICY: policy}
        )
        decision = engine.place_in(index, request, workload=mix)
        if decision.node is None:
            dropped += 1
            continue
        state = states[decision.node]
        held = tuple(
            Allocation(pod_uid=request.uid, index=d.index, memory_mib=d.memory_mib, cores=d.cores, qos=decision.qos)
            for d in decision.devices
        )
        states[decision.node] = msgspec.structs.replace(state, allocations=state.allocations + held)
        index.upsert(states[decision.node])
    allocated = sum(used_milli(n) for n in states.values())
    unallocated = round(100.0 * (1 - allocated / capacity), 3)
    return VendorRun(vendor=vendor, policy=policy, seed=seed, unallocated_pct=unallocated, pods_dropped=dropped)


def run(seeds: int = SEEDS) -> list[VendorRun]:
    return [replay(vendor, policy, seed) for vendor in FIXTURES for policy in POLICIES for seed in range(seeds)]


def _mean(runs: Sequence[VendorRun], vendor: str, policy: str) -> float:
    values = [r.unallocated_pct for r in runs if r.vendor == vendor and r.policy == policy]
    return round(sum(values) / len(values), 3)


def figures(runs: Sequence[VendorRun]) -> list[Figure]:
    """`vendor_frag.unallocated_pct.<vendor>`: the fragmentation policy's figure, binpack's as its baseline."""
    out: list[Figure] = []
    for vendor in FIXTURES:
        seeds = len({r.seed for r in runs if r.vendor == vendor})
        out.append(
            Figure(
                name=f"vendor_frag.unallocated_pct.{vendor}",
                value=_mean(runs, vendor, "fragmentation"),
                unit="% of devices",
                baselines={"binpack": _mean(runs, vendor, "binpack")},
                detail=f"{NODES} x {FIXTURES[vendor]}, generated workload, demand at 100 % of capacity, "
                f"mean of {seeds} seeds (bench/vendor_fragmentation.py)",
            )
        )
    return out


def section(seeds: int = SEEDS) -> list[Figure]:
    """The section's figures, for `bench.run`."""
    return figures(run(seeds))


def markdown(runs: Sequence[VendorRun]) -> str:
    lines = [
        "## Fragmentation on MetaX and Neuron clusters (generated workload)",
        "",
        "| vendor | node policy | unallocated % of devices | pods dropped |",
        "|---|---|---|---|",
    ]
    for vendor in FIXTURES:
        for policy in POLICIES:
            mine = [r for r in runs if r.vendor == vendor and r.policy == policy]
            dropped = sum(r.pods_dropped for r in mine) / len(mine)
            lines.append(f"| {vendor} | {policy} | {_mean(runs, vendor, policy):.2f} | {dropped:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.vendor_fragmentation", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=SEEDS)
    args = parser.parse_args(argv)
    sys.stdout.write(markdown(run(args.seeds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
