"""A hostile tenant and a hostile topic producer, running beside a chaos run's faults.

Everything here is input topoplace must not trust: forged messages on the topics the services
read (placements for pods it must not touch, bindings, lifecycle reports of pods that never
existed, topologies keyed to one node naming another or giving one UUID to two devices) and what
any tenant may write through the API (a pod of ~1.1 MB of labels and annotations, a HyperNode
whose regexMatch backtracks catastrophically in a backtracking engine, edits of a bound pod's
device annotation, a pod that squats a node's devices by naming them, a flood of pods no node can
hold, pods of another scheduler). The checker (checker.py) then says whether any of it decided
something: a pod of another scheduler touched, a pod bound against its taints or selector, a
device given twice, a service that died.

Loopback only and bounded: a fixed number of objects and rounds, one producer, ending by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from typing import Any

import aiohttp
import msgspec
from aiokafka import AIOKafkaProducer

from schemas import topics
from schemas.annotations import DECISION, DEVICES, SCHEDULER_NAME
from schemas.events import (
    BindingEvent,
    BindingOutcome,
    DeviceAssignment,
    LifecyclePhase,
    NodeTopologyEvent,
    PlacementEvent,
    PlacementOutcome,
    PodLifecycleEvent,
)
from schemas.topology import Device, Vendor
from topoplace.dev.chaos.api_calls import create

HOSTILE_LABEL = "chaos.topoplace.io/hostile"  # every object made here carries it
# A Node name long enough for `^(\w+-?)+-a100-\d+$` to backtrack for seconds in Python's `re`
# (Volcano evaluates HyperNode patterns with Go's RE2: linear time), matching nothing.
REGEX_NODE = "hostile-cordoned-control-plane-node-for-regex-x"
CATASTROPHIC_PATTERN = r"^(\w+-?)+-a100-\d+$"
CONTROL_PLANE_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
OVERSIZED_BYTES = 1_100_000
MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}
# The actor's own reads of every pod: the run's per-request limit is for the faults it times, not for a
# full list on a loaded machine, which is the checker's evidence and may take longer.
LIST_TIMEOUT = aiohttp.ClientTimeout(total=60)
LIST_ATTEMPTS = 3


ATTACKS = (
    "regex_hypernode",
    "oversized_pod",
    "squatter_pod",
    "parked_flood",
    "annotation_edit",
    "forged_placement",
    "forged_lifecycle",
    "forged_topology",
    "forged_binding",
)


class HostileTally(msgspec.Struct, kw_only=True):
    """What the hostile actor did, by kind (chaos-report.json)."""

    done: dict[str, int] = {}
    pods: int = 0  # pods of topoplace's it created (each must end bound or unschedulable)

    def count(self, kind: str, n: int = 1) -> None:
        self.done[kind] = self.done.get(kind, 0) + n

    def missing(self) -> list[str]:
        return [kind for kind in ATTACKS if not self.done.get(kind)]


async def _started_producer(bootstrap: str) -> AIOKafkaProducer | None:
    """A producer, or None while the broker is away (a scheduled restart): the next round tries again."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=5_000)
    try:
        await producer.start()
    except Exception:
        with contextlib.suppress(Exception):
            await producer.stop()
        return None
    return producer


def _pod(name: str, *, scheduler: str, requests: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {HOSTILE_LABEL: "true"}, "annotations": {}},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "main", "image": "registry.invalid/x:1", "resources": {"requests": requests}}],
            **spec,
        },
    }


def oversized_pod(name: str) -> dict[str, Any]:
    """A pod of ours carrying ~1.1 MB of labels and annotations (over Kafka's 1 MiB request limit)."""
    pod = _pod(name, scheduler=SCHEDULER_NAME, requests={"nvidia.com/gpu": "1"})
    # As much as the real API server takes: label values of at most 63 characters, no total bound on
    # labels; annotations at most 256 KiB in all.
    pod["metadata"]["labels"].update({f"bulk-label-{i:05d}": "v" * 63 for i in range(11_000)})
    pod["metadata"]["annotations"].update({f"bulk.example.com/a{i}": "x" * 10_000 for i in range(25)})
    return pod


def regex_hypernode() -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "hostile-regex", "labels": {HOSTILE_LABEL: "true"}},
        "spec": {
            "tier": 1,
            "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": CATASTROPHIC_PATTERN}}}],
        },
    }


def control_plane_node() -> dict[str, Any]:
    """A tainted node with a long name: forged placements aim at it; the regex pattern chews on it."""
    capacity = {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": REGEX_NODE, "labels": {"kubernetes.io/hostname": REGEX_NODE, HOSTILE_LABEL: "true"}},
        "spec": {"taints": [CONTROL_PLANE_TAINT]},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def forged_topology(node: str, *, duplicate_uuid: bool, now: float) -> NodeTopologyEvent:
    """Two devices for `node`, or one UUID on both: sent under another node's key, or under its own."""
    devices = tuple(
        Device(
            index=i,
            uuid="GPU-forged-0" if duplicate_uuid else f"GPU-forged-{i}",
            vendor=Vendor.NVIDIA,
            model="NVIDIA H100 80GB HBM3",
            memory_mib=81_559,
        )
        for i in range(2)
    )
    return NodeTopologyEvent(node=node, machine_type="forged", devices=devices, observed_at=now)


class HostileActor:
    """Creates the tenant's objects once, then forges messages in rounds until `stop` is set."""

    def __init__(
        self,
        *,
        session: aiohttp.ClientSession,
        bootstrap: str,
        nodes: list[str],
        seed: int,
        flood: int = 150,
    ) -> None:
        self._session = session
        self._bootstrap = bootstrap
        self._nodes = nodes
        self._rng = random.Random(seed)
        self._flood = flood
        self._foreign: dict[str, str] = {}  # name -> uid: pods of another scheduler
        self._excluded: dict[str, str] = {}  # name -> uid: pods of ours no node may take
        self.tally = HostileTally()

    async def run(self, stop: asyncio.Event, *, round_s: float = 1.0, linger_s: float = 60.0) -> HostileTally:
        """Rounds until `stop`; then on, for at most `linger_s`, until every attack was made at least once
        (edits and forged bindings need pods already bound)."""
        await self._tenant_objects()
        producer: AIOKafkaProducer | None = None
        stopped_at: float | None = None
        try:
            while True:
                if stop.is_set():
                    stopped_at = stopped_at or time.monotonic()
                    if not self.tally.missing() or time.monotonic() - stopped_at > linger_s:
                        break
                producer = producer or await _started_producer(self._bootstrap)
                with contextlib.suppress(Exception):  # a fault of the run (API, broker), never the attacker's stop
                    await self._round(producer)
                await asyncio.sleep(round_s)  # the attacker's pace, not synchronisation
        finally:
            if producer is not None:
                with contextlib.suppress(Exception):
                    await producer.stop()
        return self.tally

    # --- what any tenant may write through the API ---------------------------------------------------

    async def _tenant_objects(self) -> None:
        await create(self._session, "/api/v1/nodes", control_plane_node())
        await create(self._session, "/apis/topology.volcano.sh/v1alpha1/hypernodes", regex_hypernode())
        self.tally.count("regex_hypernode")
        pods = "/api/v1/namespaces/default/pods"
        await create(self._session, pods, oversized_pod("hostile-oversized"))
        self.tally.count("oversized_pod")
        self.tally.pods += 1
        for i in range(3):
            foreign = _pod(f"hostile-foreign-{i}", scheduler="default-scheduler", requests={"cpu": "1"})
            await create(self._session, pods, foreign)
            excluded = _pod(
                f"hostile-excluded-{i}",
                scheduler=SCHEDULER_NAME,
                requests={"nvidia.com/gpu": "1"},
                nodeSelector={"chaos.topoplace.io/no-such-label": "anywhere"},
            )
            await create(self._session, pods, excluded)
        self.tally.pods += 3
        # A pod that names a node and its devices itself, asking for none: it must hold nothing.
        squatter = _pod("hostile-squatter", scheduler="default-scheduler", requests={"cpu": "100m"})
        squatter["spec"]["nodeName"] = self._nodes[0]
        squatter["metadata"]["annotations"][DEVICES] = msgspec.json.encode(
            [DeviceAssignment(index=i) for i in range(8)]
        ).decode()
        await create(self._session, pods, squatter)
        self.tally.count("squatter_pod")
        for i in range(self._flood):  # nothing holds 500 CPUs: parked, and retried on every capacity change
            await create(
                self._session, pods, _pod(f"hostile-flood-{i}", scheduler=SCHEDULER_NAME, requests={"cpu": "500"})
            )
        self.tally.count("parked_flood", self._flood)
        self.tally.pods += self._flood
        self._foreign = await self._uids("hostile-foreign-")
        self._excluded = await self._uids("hostile-excluded-")

    async def _pods(self, params: dict[str, str]) -> list[dict[str, Any]]:
        """The pods a list returns, asked again when the API server (under the run's faults and load) does not
        answer in time: the actor's evidence, not a fault it measures."""
        for attempt in range(LIST_ATTEMPTS):
            try:
                async with self._session.get(
                    "/api/v1/namespaces/default/pods", params=params, timeout=LIST_TIMEOUT
                ) as r:
                    items: list[dict[str, Any]] = (await r.json()).get("items") or [] if r.status == 200 else []
                    return items
            except (TimeoutError, aiohttp.ClientError):
                if attempt == LIST_ATTEMPTS - 1:
                    raise
        return []

    async def _uids(self, prefix: str) -> dict[str, str]:
        items = await self._pods({"labelSelector": HOSTILE_LABEL})
        return {p["metadata"]["name"]: p["metadata"]["uid"] for p in items if p["metadata"]["name"].startswith(prefix)}

    async def _bound_pods_of_ours(self) -> list[dict[str, Any]]:
        items = await self._pods({})
        return [
            p
            for p in items
            if p["spec"].get("schedulerName") == SCHEDULER_NAME
            and p["spec"].get("nodeName")
            and DEVICES in (p["metadata"].get("annotations") or {})
        ]

    async def _edit_devices(self, pod: dict[str, Any]) -> None:
        """Rewrite a bound pod's device annotation, as a tenant may (admission aside)."""
        meta = pod["metadata"]
        other = [DeviceAssignment(index=(d + 1) % 8) for d in range(self._rng.randint(1, 3))]
        body = {"metadata": {"annotations": {DEVICES: msgspec.json.encode(other).decode()}}}
        url = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        async with self._session.patch(url, data=msgspec.json.encode(body), headers=MERGE_PATCH) as r:
            if r.status == 200:
                self.tally.count("annotation_edit")

    # --- what a hostile producer may write onto the topics --------------------------------------------

    async def _round(self, producer: AIOKafkaProducer | None) -> None:
        bound = await self._bound_pods_of_ours()
        for pod in self._rng.sample(bound, min(3, len(bound))):
            await self._edit_devices(pod)
        if producer is None:
            return
        now = time.time()
        for name, uid in (*self._foreign.items(), *self._excluded.items()):
            target = REGEX_NODE if name.startswith("hostile-foreign") else self._rng.choice(self._nodes)
            await self._send(producer, topics.PLACEMENTS, target, self._placement(name, uid, target, now))
            self.tally.count("forged_placement")
        ghost = str(uuid.UUID(int=self._rng.getrandbits(128)))
        lifecycle = PodLifecycleEvent(
            uid=ghost,
            namespace="default",
            name=f"ghost-{ghost[:8]}",
            phase=LifecyclePhase.BOUND,
            node=self._rng.choice(self._nodes),
            devices=tuple(DeviceAssignment(index=i) for i in range(8)),
            observed_at=now,
        )
        await self._send(producer, topics.PODS_LIFECYCLE, ghost, lifecycle)
        self.tally.count("forged_lifecycle")
        key_node, named = self._rng.sample(self._nodes, 2)
        # One node's key naming another node; and a node's own key with one UUID on two devices.
        await self._send(
            producer, topics.TOPOLOGY_NODES, key_node, forged_topology(named, duplicate_uuid=False, now=now)
        )
        await self._send(producer, topics.TOPOLOGY_NODES, named, forged_topology(named, duplicate_uuid=True, now=now))
        self.tally.count("forged_topology", 2)
        for pod in self._rng.sample(bound, min(2, len(bound))):
            await self._send(producer, topics.BINDINGS, pod["metadata"]["uid"], self._false_binding(pod, now))
            self.tally.count("forged_binding")

    def _placement(self, name: str, uid: str, node: str, now: float) -> PlacementEvent:
        return PlacementEvent(
            decision_id=f"forged-{uuid.UUID(int=self._rng.getrandbits(128))}",
            uid=uid,
            namespace="default",
            name=name,
            pod_resource_version="",
            outcome=PlacementOutcome.PLACED,
            node=node,
            devices=(DeviceAssignment(index=0),),
            requests={"nvidia.com/gpu": "1"},
            decided_at=now,
        )

    def _false_binding(self, pod: dict[str, Any], now: float) -> BindingEvent:
        """A bound pod's decision reported as refused: a placer that believed it would free its devices."""
        meta = pod["metadata"]
        return BindingEvent(
            decision_id=(meta.get("annotations") or {}).get(DECISION, ""),
            uid=meta["uid"],
            namespace=meta["namespace"],
            name=meta["name"],
            outcome=BindingOutcome.CONFLICT,
            node=pod["spec"]["nodeName"],
            reason="forged",
            finished_at=now,
        )

    async def _send(self, producer: AIOKafkaProducer, topic: topics.Topic, key: str, event: msgspec.Struct) -> None:
        await producer.send_and_wait(topic.name, msgspec.json.encode(event), key=key.encode())
