"""The node agent: publishes one node's device topology and usage (the fleet: several nodes').

topology.nodes (compacted, key = node) gets the topology at start, again
whenever it changes, every TOPOPLACE_TOPOLOGY_REPUBLISH_SECONDS (60 s) and after
every reconnect, so a broker that lost its data gets it back; usage.devices (key = node) gets the usage every
interval. The source is NVML or a fixture (a shipped name or a file); a
fixture node has no load, so its usage is zero and every device healthy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Protocol

import msgspec
from opentelemetry import trace
from opentelemetry.util.types import AttributeValue
from prometheus_client import Counter

from schemas import topics
from schemas.events import DeviceUsage, DeviceUsageEvent, NodeTopologyEvent
from schemas.topics import Topic
from schemas.topology import NodeTopology
from services.collector.node import nvml_source
from services.collector.node.nvml_source import NodeReading, NvmlUnavailableError
from services.collector.node.topo_matrix import TopoMatrixError
from services.collector.node.topology_files import FixtureError, load_topology
from topoplace import telemetry
from topoplace.config import Settings
from topoplace.event_checks import InvalidEvent, check_event
from topoplace.kafka.bootstrap import check_kafka_setting
from topoplace.service_runtime import Gate, Loop, RunContext, ServiceRun, ServiceSpec, Stage, run_service
from topoplace.supervise import raise_when_recovered

SERVICE = "topoplace-collector"
NVML_SOURCE = "nvml"

log = logging.getLogger(__name__)

READ_FAILURES = Counter("topoplace_collector_read_failures_total", "Reads of the device source that failed", ["source"])
INVALID_TOPOLOGIES = Counter(
    "topoplace_collector_invalid_topologies_total",
    "Topology readings refused as invalid by topology.nodes' rules (not published)",
)
DEVICE_PROBLEMS = Counter(
    "topoplace_collector_device_problems_total", "Device queries that failed (the device is reported unhealthy)"
)

# What a source can fail with; anything else is a bug and propagates.
SOURCE_ERRORS = (FixtureError, TopoMatrixError, NvmlUnavailableError, OSError)

Reader = Callable[[], NodeReading]


class Publisher(Protocol):
    async def send(self, topic: Topic | str, key: str | None, event: msgspec.Struct | None) -> None: ...


# --- pure ----------------------------------------------------------------------------------


def idle_usage(topology: NodeTopology) -> tuple[DeviceUsage, ...]:
    """Usage of a node nobody runs on: nothing used, health as the topology says."""
    return tuple(DeviceUsage(index=d.index, healthy=d.healthy) for d in topology.devices)


def topology_event(topology: NodeTopology, observed_at: float) -> NodeTopologyEvent:
    return NodeTopologyEvent(
        node=topology.node,
        machine_type=topology.machine_type,
        devices=topology.devices,
        links=topology.links,
        source=topology.source,
        observed_at=observed_at,
    )


def usage_event(node: str, usage: tuple[DeviceUsage, ...], observed_at: float) -> DeviceUsageEvent:
    return DeviceUsageEvent(node=node, devices=usage, observed_at=observed_at)


def make_reader(source: str, *, node: str, model: str | None = None, memory_mib: int | None = None) -> Reader:
    """A blocking function that reads the node once from `source` ("nvml", a fixture name or a file)."""
    if source == NVML_SOURCE:
        return lambda: nvml_source.read_node(node)

    def read_fixture() -> NodeReading:
        # Read again on every tick, so that an edited fixture file is published as a change.
        topology = load_topology(source, node=node, model=model, memory_mib=memory_mib)
        return NodeReading(topology=topology, usage=idle_usage(topology))

    return read_fixture


# --- the loop ------------------------------------------------------------------------------


async def publish_loop(
    producer: Publisher,
    read: Reader,
    *,
    node: str,
    interval_seconds: float,
    stop: asyncio.Event,
    first: NodeReading | None = None,
    on_topology: Callable[[NodeTopology], None] | None = None,
    clock: Callable[[], float] = time.time,
    republish_seconds: float = 60.0,
    monotonic: Callable[[], float] = time.monotonic,
) -> None:
    """Publish until `stop` is set: the topology when it differs from the last one sent, the usage every tick.

    An unchanged topology is sent again every `republish_seconds` (and by every new
    loop, as after a reconnect): a broker that lost its data gets it back. A failed
    read after the first is logged and retried on the next tick (the last topology
    stays valid); `first` is a reading already taken at start.
    """
    tracer = telemetry.get_tracer(__name__, SERVICE)
    last: NodeTopology | None = None
    last_sent = 0.0
    refused: NodeTopology | None = None  # the last topology refused as invalid (logged once)
    reading = first
    while not stop.is_set():
        if reading is None:
            try:
                reading = await asyncio.to_thread(read)
            except SOURCE_ERRORS as exc:
                READ_FAILURES.labels(source=type(exc).__name__).inc()
                log.warning("collector.read_failed", extra={"fields": {"node": node, "error": str(exc)}})
        if reading is not None:
            _log_problems(node, reading)
            now = clock()
            if reading.topology != last or monotonic() - last_sent >= republish_seconds:
                if await _publish_topology(producer, node, reading.topology, now, tracer, refused=refused):
                    if on_topology is not None:
                        on_topology(reading.topology)
                    refused = None
                else:
                    refused = reading.topology
                last = reading.topology
                last_sent = monotonic()
            await producer.send(topics.USAGE_DEVICES, node, usage_event(node, reading.usage, now))
        reading = None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval_seconds)


async def _publish_topology(
    producer: Publisher,
    node: str,
    topology: NodeTopology,
    now: float,
    tracer: trace.Tracer,
    *,
    refused: NodeTopology | None,
) -> bool:
    """Publish the node's topology unless it breaks topology.nodes' rules (the consumers' own check).

    An invalid topology (two devices with one UUID, a link to a device the node lacks, another
    node's name) would only be dead-lettered by every consumer: it is refused here, logged
    once per distinct topology and counted, and the node keeps whatever it published before.
    """
    event = topology_event(topology, now)
    try:
        check_event(topics.TOPOLOGY_NODES.name, node, event)
    except InvalidEvent as exc:
        INVALID_TOPOLOGIES.inc()
        if topology != refused:
            log.error("collector.topology_invalid", extra={"fields": {"node": node, "error": str(exc)}})
        return False
    attributes: dict[str, AttributeValue] = {
        "node": node,
        "machine_type": topology.machine_type,
        "devices": len(topology.devices),
    }
    with tracer.start_as_current_span("collector.publish_topology", attributes=attributes):
        await producer.send(topics.TOPOLOGY_NODES, node, event)
    log.info(
        "collector.topology_published",
        extra={"fields": {"node": node, "machine_type": topology.machine_type, "devices": len(topology.devices)}},
    )
    return True


def _log_problems(node: str, reading: NodeReading) -> None:
    for problem in reading.problems:
        DEVICE_PROBLEMS.inc()
        log.warning(
            "collector.device_problem",
            extra={"fields": {"node": node, "device": problem.index, "call": problem.call, "reason": problem.reason}},
        )


# --- the service ---------------------------------------------------------------------------


async def run_node_agent(
    settings: Settings,
    *,
    node: str,
    source: str,
    interval_seconds: float = 10.0,
    stop: asyncio.Event | None = None,
    model: str | None = None,
    memory_mib: int | None = None,
) -> None:
    """Run the node agent until `stop` is set. A source that cannot be read at start raises its error."""
    read = make_reader(source, node=node, model=model, memory_mib=memory_mib)
    await publish_nodes(settings, {node: read}, interval_seconds=interval_seconds, stop=stop)


async def publish_nodes(
    settings: Settings,
    readers: Mapping[str, Reader],
    *,
    interval_seconds: float = 10.0,
    stop: asyncio.Event | None = None,
) -> None:
    """Publish every node's topology and usage through one producer until `stop` is set.

    Every node is read once before anything is started, so a source that
    cannot be read raises its error at once. Ready once every node's topology
    is on Kafka.
    """
    if interval_seconds <= 0:
        raise ValueError(f"interval_seconds: must be positive, got {interval_seconds}")
    firsts: dict[str, NodeReading | None] = {node: await asyncio.to_thread(read) for node, read in readers.items()}
    check_kafka_setting(settings)  # before "started" is logged
    stop = stop if stop is not None else asyncio.Event()

    async def build(run: RunContext) -> ServiceRun:
        """One run starts with no topology sent, so a reconnect republishes every node's."""
        published: set[str] = set()
        all_published = asyncio.Event()

        def on_topology(topology: NodeTopology) -> None:
            published.add(topology.node)
            if len(published) == len(readers):
                all_published.set()

        def publishing(node: str, read: Reader) -> Loop:
            return Loop(
                f"publish-{node}",
                lambda: publish_loop(
                    run.producer,
                    read,
                    node=node,
                    interval_seconds=interval_seconds,
                    stop=run.stop,
                    first=firsts.pop(node, None),  # taken at start: used by the first run only
                    on_topology=on_topology,
                    republish_seconds=settings.topology_republish_seconds,
                ),
            )

        # A broker back from an outage may have lost the topologies: start over, which republishes.
        recovery = Loop("recovery", lambda: raise_when_recovered(run.producer.recovered))
        topologies = Gate(
            name="topologies",
            passed=all_published,
            waiting=lambda: f"{len(published)} of {len(readers)} topologies published",
        )
        if not readers:
            all_published.set()
        loops = (*(publishing(node, read) for node, read in readers.items()), recovery)
        return ServiceRun(stages=(Stage(loops=loops, gates=(topologies,)),))

    spec = ServiceSpec(
        name=SERVICE,
        log_name="collector.node_agent",
        settings=settings,
        build=build,
        stop=stop,
        started_fields={"nodes": list(readers)},
    )
    await run_service(spec)
