"""The demo's workload: a stated, seeded mix of pods for every vendor, some that can never fit."""

from __future__ import annotations

import random
from typing import Any

import msgspec

TOPOLOGY_AWARE = {"hami.io/gpu-scheduler-policy": "topology-aware"}


class PodKind(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    share: float  # fraction of the workload
    requests: dict[str, str]
    annotations: dict[str, str] = {}
    fits: bool = True  # False: no node of the demo cluster can ever host it
    claim_template: str = ""  # DRA: the pod's GPUs come from a claim of this ResourceClaimTemplate


# The mix for 200 pods asks for ~106 of 120 NVIDIA GPUs, 14 of 16 MetaX cards and 22 of 28
# Neuron devices, so most pods fit while fragmentation still decides some large ones.
MIX: tuple[PodKind, ...] = (
    PodKind(
        name="nvidia-share",
        share=0.61,
        requests={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000", "nvidia.com/gpucores": "25"},
    ),
    PodKind(name="dra-2", share=0.02, requests={}, claim_template="demo-two-gpus"),
    PodKind(name="nvidia-1", share=0.12, requests={"nvidia.com/gpu": "1"}),
    PodKind(name="nvidia-2", share=0.06, requests={"nvidia.com/gpu": "2"}, annotations=TOPOLOGY_AWARE),
    PodKind(name="nvidia-4", share=0.025, requests={"nvidia.com/gpu": "4"}, annotations=TOPOLOGY_AWARE),
    PodKind(name="nvidia-8", share=0.005, requests={"nvidia.com/gpu": "8"}, annotations=TOPOLOGY_AWARE),
    PodKind(
        name="metax-2",
        share=0.02,
        requests={"metax-tech.com/sgpu": "2", "metax-tech.com/vcore": "100"},
        annotations={"metax-tech.com/sgpu-topology-aware": "true"},
    ),
    PodKind(
        name="metax-share",
        share=0.05,
        requests={"metax-tech.com/sgpu": "1", "metax-tech.com/vcore": "50", "metax-tech.com/vmemory": "16"},
    ),
    PodKind(name="neuron-4", share=0.015, requests={"aws.amazon.com/neuron": "4"}),
    PodKind(name="neuron-1", share=0.02, requests={"aws.amazon.com/neuron": "1"}),
    PodKind(name="neuroncore-2", share=0.03, requests={"aws.amazon.com/neuroncore": "2"}),
    PodKind(name="too-many-gpus", share=0.01, requests={"nvidia.com/gpu": "16"}, fits=False),
    PodKind(
        name="too-much-memory",
        share=0.01,
        requests={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "200000"},
        fits=False,
    ),
    PodKind(
        name="metax-too-many",
        share=0.005,
        requests={"metax-tech.com/sgpu": "9", "metax-tech.com/vcore": "100"},
        fits=False,
    ),
)


class DemoPod(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    kind: str
    requests: dict[str, str]
    annotations: dict[str, str] = {}
    expected_to_fit: bool = True
    claim_template: str = ""


def generate(count: int = 200, seed: int = 7) -> tuple[DemoPod, ...]:
    """`count` pods in the MIX's proportions (largest remainders), in a seeded random order."""
    exact = [kind.share * count for kind in MIX]
    counts = [int(x) for x in exact]
    by_remainder = sorted(range(len(MIX)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in by_remainder[: count - sum(counts)]:
        counts[i] += 1
    kinds = [kind for kind, n in zip(MIX, counts, strict=True) for _ in range(n)]
    random.Random(seed).shuffle(kinds)
    return tuple(
        DemoPod(
            name=f"{kind.name}-{i:04d}",
            kind=kind.name,
            requests=kind.requests,
            annotations=kind.annotations,
            expected_to_fit=kind.fits,
            claim_template=kind.claim_template,
        )
        for i, kind in enumerate(kinds)
    )


class GangKind(msgspec.Struct, frozen=True, kw_only=True):
    """A gang of the demo: a Volcano PodGroup with a network constraint, and its member pods."""

    name: str
    members: int
    requests: dict[str, str]
    annotations: dict[str, str] = {}
    mode: str = "hard"  # Volcano's networkTopology mode
    highest_tier: int = 1
    fits: bool = True


# Submitted before the single pods: a training job that must share one leaf switch, a batch of
# shares that prefers one, and a job no leaf switch can hold (it must bind nothing).
GANGS: tuple[GangKind, ...] = (
    GangKind(name="train-4x8", members=4, requests={"nvidia.com/gpu": "8"}, annotations=TOPOLOGY_AWARE),
    GangKind(
        name="etl-16x1",
        members=16,
        requests={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000", "nvidia.com/gpucores": "25"},
        mode="soft",
    ),
    GangKind(name="wide-8x8", members=8, requests={"nvidia.com/gpu": "8"}, fits=False),
)
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"


def gang_pods(gang: GangKind) -> tuple[DemoPod, ...]:
    return tuple(
        DemoPod(
            name=f"{gang.name}-{i:02d}",
            kind=f"gang {gang.name}",
            requests=gang.requests,
            annotations={**gang.annotations, GROUP_NAME_ANNOTATION: gang.name},
            expected_to_fit=gang.fits,
        )
        for i in range(gang.members)
    )


def podgroup_manifest(gang: GangKind, *, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": gang.name, "namespace": namespace},
        "spec": {
            "minMember": gang.members,
            "networkTopology": {"mode": gang.mode, "highestTierAllowed": gang.highest_tier},
        },
    }


def pod_manifest(pod: DemoPod, *, scheduler_name: str, namespace: str = "default") -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": dict(pod.requests), "limits": dict(pod.requests)}
    spec_extra: dict[str, Any] = {}
    if pod.claim_template:  # DRA: the GPUs come from a claim made from the template
        resources["claims"] = [{"name": "gpu"}]
        spec_extra["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": pod.claim_template}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": namespace,
            "labels": {"app": "topoplace-demo", "topoplace.io/demo-kind": pod.kind},
            "annotations": dict(pod.annotations),
        },
        "spec": {
            "schedulerName": scheduler_name,
            **spec_extra,
            "containers": [{"name": "main", "image": "registry.invalid/demo:latest", "resources": resources}],
        },
    }


# Submitted with the gangs, whatever the mix: the DRA pool's partitions, shares and NICs at work.
# Two pods take one 1g partition each, two share one GPU's memory, one asks a GPU and a NIC on one
# PCIe root (templates: topoplace/dev/demo/dra_pool.py).
DRA_SHOWCASE: tuple[tuple[str, str, int], ...] = (  # (kind, claim template, how many)
    ("dra-mig", "demo-mig-1g", 2),
    ("dra-share", "demo-gpu-share", 2),
    ("dra-gpu-nic", "demo-gpu-nic", 1),
)


def dra_showcase_pods() -> tuple[DemoPod, ...]:
    return tuple(
        DemoPod(name=f"{kind}-{i:02d}", kind=kind, requests={}, claim_template=template)
        for kind, template, count in DRA_SHOWCASE
        for i in range(count)
    )
