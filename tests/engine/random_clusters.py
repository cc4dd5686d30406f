"""Random clusters of the fixture machines and random pods, for the cache equivalence tests.

Nodes repeat on purpose (same machine, same load, another name; the same
state rebuilt from fresh tuples) so that the engine's per-node answers are
shared between nodes and reused between decisions.
"""

from __future__ import annotations

import random

import msgspec

from engine import Allocation, NodeState, PodRequest, Snapshot
from engine.node.vendors.metax.gpu import LOSSES_ANNOTATION, SCORES_ANNOTATION
from services.collector.node.topology_files import fixture_node_labels, load_topology

MACHINES = (
    "dgx-h100", "dgx1-v100", "pcie-8gpu-2socket", "pcie-4gpu", "metax-8gpu-2zone", "trn1.32xlarge", "inf2.48xlarge",
)  # fmt: skip
QOS = ("", "best-effort", "fixed-share", "burst-share")
APP_CLASSES = ("", "online", "offline")


def _allocations(rng: random.Random, node: int, devices: int, cores: int) -> tuple[Allocation, ...]:
    out: list[Allocation] = []
    for index in range(devices):
        if rng.random() < 0.45:
            continue
        for holder in range(rng.choice((1, 1, 1, 2, 3))):
            whole = rng.random() < 0.5
            out.append(
                Allocation(
                    pod_uid=f"pod-{node}-{index}-{holder}",
                    index=index,
                    memory_mib=0 if whole else rng.choice((1024, 4096, 16384)),
                    cores=cores if whole else rng.choice((0, 10, 25, 50)),
                    qos=rng.choice(QOS),
                    app_class=rng.choice(APP_CLASSES),
                )
            )
    return tuple(out)


def _near_twin(rng: random.Random, node: NodeState, name: str) -> NodeState:
    """The same node but for one detail the engine may read: a cached answer must not leak to it."""
    allocations = list(node.allocations)
    if allocations and rng.random() < 0.7:
        x = rng.randrange(len(allocations))
        field = rng.choice(("qos", "app_class", "memory_mib", "cores", "index"))
        value: object = {
            "qos": rng.choice(QOS),
            "app_class": rng.choice(APP_CLASSES),
            "memory_mib": rng.choice((0, 2048, 8192)),
            "cores": rng.choice((0, 30, 100)),
            "index": rng.randrange(len(node.devices)),
        }[field]
        allocations[x] = msgspec.structs.replace(allocations[x], **{field: value})
        return msgspec.structs.replace(node, name=name, allocations=tuple(allocations))
    detail = rng.choice(("labels", "annotations", "machine_type"))
    if detail == "labels":
        return msgspec.structs.replace(node, name=name, labels={})
    if detail == "annotations":
        annotations = {SCORES_ANNOTATION: '{"1": 90, "2": 40}', LOSSES_ANNOTATION: '{"1": 5, "2": 20}'}
        return msgspec.structs.replace(node, name=name, annotations=annotations)
    return msgspec.structs.replace(node, name=name, machine_type="trn1.32xlarge")


def random_cluster(rng: random.Random, size: int, machines: tuple[str, ...] = MACHINES) -> Snapshot:
    nodes: list[NodeState] = []
    for i in range(size):
        if nodes and rng.random() < 0.2:
            nodes.append(_near_twin(rng, rng.choice(nodes), f"node-{i:04d}"))
            continue
        if nodes and rng.random() < 0.3:
            # the same state under another name, sometimes rebuilt from fresh tuples
            twin = rng.choice(nodes)
            copy = msgspec.structs.replace(twin, name=f"node-{i:04d}")
            if rng.random() < 0.5:
                copy = msgspec.json.decode(msgspec.json.encode(copy), type=NodeState)
            nodes.append(copy)
            continue
        machine = rng.choice(machines)
        topology = load_topology(machine)
        labels = fixture_node_labels(machine) if rng.random() < 0.8 else {}
        annotations: dict[str, str] = {}
        if machine.startswith("metax") and rng.random() < 0.5:
            annotations = {SCORES_ANNOTATION: '{"1": 100, "2": 50}', LOSSES_ANNOTATION: '{"1": 0, "2": 20}'}
        devices = topology.devices
        if rng.random() < 0.15:
            sick = rng.randrange(len(devices))
            devices = tuple(msgspec.structs.replace(d, healthy=False) if d.index == sick else d for d in devices)
        nodes.append(
            NodeState(
                name=f"node-{i:04d}",
                machine_type=topology.machine_type,
                devices=devices,
                links=topology.links,
                labels=labels,
                annotations=annotations,
                ready=rng.random() > 0.05,
                unschedulable=rng.random() < 0.05,
                allocations=_allocations(rng, i, len(devices), devices[0].cores),
            )
        )
    rng.shuffle(nodes)  # the engine sorts by name itself
    return Snapshot(nodes=tuple(nodes))


def _nvidia_pod(rng: random.Random, uid: str) -> PodRequest:
    requests = {"nvidia.com/gpu": str(rng.choice((1, 1, 2, 2, 3, 4, 8)))}
    kind = rng.random()
    if kind < 0.25:
        requests["nvidia.com/gpumem"] = str(rng.choice((2048, 8192, 30000)))
    elif kind < 0.4:
        requests["nvidia.com/gpumem-percentage"] = str(rng.choice((10, 50, 100)))
    if rng.random() < 0.3:
        requests["nvidia.com/gpucores"] = str(rng.choice((0, 20, 100)))
    annotations: dict[str, str] = {}
    if rng.random() < 0.6:
        annotations["hami.io/gpu-scheduler-policy"] = rng.choice(
            ("binpack", "spread", "topology-aware", "mutex", "numa", "binpack,topology-aware")
        )
    if rng.random() < 0.5:
        annotations["hami.io/node-scheduler-policy"] = rng.choice(("binpack", "spread"))
    return PodRequest(uid=uid, requests=requests, annotations=annotations)


def metax_pod(rng: random.Random, uid: str) -> PodRequest:
    annotations: dict[str, str] = {}
    if rng.random() < 0.5:
        requests = {"metax-tech.com/gpu": str(rng.choice((1, 2, 4, 8)))}
    else:
        requests = {"metax-tech.com/sgpu": str(rng.choice((1, 1, 2)))}
        if rng.random() < 0.7:
            requests["metax-tech.com/vcore"] = str(rng.choice((10, 30, 100)))
        if rng.random() < 0.7:
            requests["metax-tech.com/vmemory"] = str(rng.choice((1, 4, 16)))
        if rng.random() < 0.5:
            annotations["metax-tech.com/sgpu-qos-policy"] = rng.choice(QOS[1:])
        if rng.random() < 0.3:
            annotations["metax-tech.com/sgpu-app-class"] = rng.choice(APP_CLASSES[1:])
    if rng.random() < 0.4:
        annotations["hami.io/node-scheduler-policy"] = rng.choice(("binpack", "spread"))
    if rng.random() < 0.3:
        annotations["metax-tech.com/sgpu-topology-aware"] = rng.choice(("true", "false"))
    return PodRequest(uid=uid, requests=requests, annotations=annotations)


def _neuron_pod(rng: random.Random, uid: str) -> PodRequest:
    if rng.random() < 0.5:
        requests = {"aws.amazon.com/neuron": str(rng.choice((1, 2, 3, 4, 8, 16)))}
    else:
        requests = {"aws.amazon.com/neuroncore": str(rng.choice((1, 2, 4, 8)))}
    annotations: dict[str, str] = {}
    if rng.random() < 0.4:
        annotations["hami.io/node-scheduler-policy"] = rng.choice(("binpack", "spread"))
    return PodRequest(uid=uid, requests=requests, annotations=annotations)


def random_pod(rng: random.Random, uid: str) -> PodRequest:
    return rng.choice((_nvidia_pod, _nvidia_pod, metax_pod, _neuron_pod))(rng, uid)
