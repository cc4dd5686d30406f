"""What of a pending pod's annotations goes on pods.pending / gangs.pending: only what is read. Pure.

A tenant writes any annotations (up to the API server's 256 KiB), and nothing downstream reads
most of them. Copying them all made one pod's event exceed Kafka's 1 MiB request limit, and the
broker's refusal stopped the whole cluster watcher. So an event carries the annotation keys the
placer and the engine read, listed here once, each with its reader; its labels all go (pod
affinity and topology spread read any of them), within the event's size bound.

To make an annotation reach the placer, add it here (and the test that shows its reader needs it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from engine.decide.gang import ranks
from engine.node import vendor
from engine.node.vendors import neuron, nvidia
from engine.node.vendors.metax import qos as metax_qos
from engine.node.vendors.metax import request as metax_request
from schemas import gangs as gang_keys
from schemas import hami
from schemas.dra import ContainerRequests
from schemas.events import PendingPodEvent
from services.collector.cluster.objects import Pod

# Annotations of a pending pod, by who reads them from PodRequest.annotations.
PENDING_ANNOTATIONS: Mapping[str, str] = {
    # every vendor: HAMi's node policy (binpack / spread / topoplace's own)
    vendor.NODE_POLICY: "engine.vendor: the node scoring policy every vendor reads",
    nvidia.GPU_POLICY: "engine.vendors (nvidia, metax, neuron): the device policy (binpack, spread, numa, mutex)",
    hami.SCORING_WEIGHTS: "engine.vendors.nvidia: HAMi's device scoring weights",
    nvidia.USE_UUID: "engine.vendors.nvidia: GPUs the pod may use",
    nvidia.NOUSE_UUID: "engine.vendors.nvidia: GPUs the pod must not use",
    nvidia.USE_TYPE: "engine.vendors.nvidia: GPU models the pod may use",
    nvidia.NOUSE_TYPE: "engine.vendors.nvidia: GPU models the pod must not use",
    nvidia.NUMA_BIND: "engine.vendors.nvidia: GPUs of one NUMA node",
    neuron.USE_UUID: "engine.vendors.neuron: Neuron devices the pod may use",
    neuron.NOUSE_UUID: "engine.vendors.neuron: Neuron devices the pod must not use",
    metax_request.USE_UUID: "engine.vendors.metax: MetaX cards the pod may use",
    metax_request.NOUSE_UUID: "engine.vendors.metax: MetaX cards the pod must not use",
    metax_request.TOPOLOGY_AWARE: "engine.vendors.metax: sGPU placement by MetaXLink zone",
    metax_qos.QOS_ANNOTATION: "engine.vendors.metax: the sGPU QoS pool (workload class)",
    metax_qos.APP_CLASS_ANNOTATION: "engine.vendors.metax: online / offline class",
    # gangs: the engine's gang input (engine.gang_input) reads Kueue's pod-group annotations
    gang_keys.VOLCANO_GROUP_ANNOTATION: "the Volcano PodGroup the pod belongs to",
    gang_keys.KUEUE_GROUP: "engine.gang_input: the Kueue pod group (also a label)",
    gang_keys.KUEUE_TOTAL: "engine.gang_input: the Kueue gang's minimum",
    gang_keys.KUEUE_REQUIRED: "engine.gang_input: Kueue's required topology level",
    gang_keys.KUEUE_PREFERRED: "engine.gang_input: Kueue's preferred topology level",
    gang_keys.KUEUE_SLICE_REQUIRED: "engine.gang_input: Kueue's slice topology level",
    gang_keys.KUEUE_SLICE_SIZE: "engine.gang_input: Kueue's slice size",
    ranks.JOB_COMPLETION_INDEX: "engine.decide.gang.ranks: an Indexed Job member's rank",
}

# Labels of a pending pod: every one goes. Running pods' pod anti-affinity and the spread
# selectors (the pod's own, its DefaultSelector) may name any key of the newcomer, so an
# allow-list would place it where kube-scheduler would not. What bounds them is the event's own
# bound (MAX_POD_EVENT_BYTES): a pod whose labels and affinity push it over goes out reduced,
# with the reason, as it did before; the API server itself bounds no pod's labels in total.


def kept(values: Mapping[str, str], keys: Iterable[str]) -> dict[str, str]:
    """The entries of `values` whose key is in `keys`, in `values`' order."""
    wanted = set(keys)
    return {k: v for k, v in values.items() if k in wanted}


def pending_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    return kept(annotations, PENDING_ANNOTATIONS)


def unpublishable(event: PendingPodEvent, reason: str) -> PendingPodEvent:
    """The pod's event reduced to who it is and why it could not go out whole: the placer reports it."""
    return PendingPodEvent(
        uid=event.uid,
        namespace=event.namespace,
        name=event.name,
        resource_version=event.resource_version,
        owner=event.owner[:256],
        gang=event.gang,
        priority=event.priority,
        created_at=event.created_at,
        observed_at=event.observed_at,
        unpublishable=reason,
    )


def bounded(event: PendingPodEvent) -> tuple[PendingPodEvent, str | None]:
    """The event, or its unpublishable form with the reason when it is over PendingPodEvent.max_bytes."""
    size = len(msgspec.json.encode(event))
    if size <= event.max_bytes:
        return event, None
    reason = (
        f"the pod's scheduling event is {size:,} bytes, over topoplace's bound of {event.max_bytes:,}: "
        "shorten its labels, affinity, topology spread constraints, tolerations, node selector "
        "or the scheduling annotations it sets"
    )
    return unpublishable(event, reason), reason


def _extended(name: str) -> bool:
    """An extended resource name (domain-qualified, outside kubernetes.io): a DeviceClass may serve it."""
    domain, sep, _ = name.partition("/")
    if not sep:
        return False
    if domain == "deviceclass.resource.kubernetes.io":  # a class's implicit name
        return True
    return domain != "kubernetes.io" and not domain.endswith(".kubernetes.io")


def container_requests(pod: Pod) -> tuple[ContainerRequests, ...]:
    """Each container's requests, init containers first, when one asks an extended resource (else none:
    the placer needs them only to name the requests of a DRA-backed claim, KEP-5004). A limit stands
    for a missing request, as the API server defaults it."""
    containers = (*pod.spec.init_containers, *pod.spec.containers)
    out = tuple(
        ContainerRequests(
            name=c.name,
            requests={k: str(v) for k, v in {**c.resources.limits, **c.resources.requests}.items()},
        )
        for c in containers
    )
    return out if any(_extended(name) for c in out for name in c.requests) else ()
