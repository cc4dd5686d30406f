"""The embedded broker: starts, answers, stops, leaves no process behind; topics are created."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from infra_helpers import process_gone, unique_topic

import schemas.topics
from schemas import events
from topoplace.dev.broker import EmbeddedBroker
from topoplace.kafka.admin import BrokerError, ensure_topics
from topoplace.kafka.broker_kind import is_embedded


async def test_start_answers_metadata_and_stop_leaves_no_process() -> None:
    broker = EmbeddedBroker()
    bootstrap = await broker.start()
    pid = broker.pid
    assert pid is not None
    assert os.getpgid(pid) == pid  # its own process group, so the group can be killed
    assert bootstrap.startswith("127.0.0.1:")
    assert await is_embedded(bootstrap)
    await broker.stop()
    assert process_gone(pid, timeout=0)  # reaped: not even a zombie
    assert broker.pid is None


async def test_context_manager_stops_on_error() -> None:
    with pytest.raises(RuntimeError, match="boom"):
        async with EmbeddedBroker() as broker:
            pid = broker.pid
            raise RuntimeError("boom")
    assert pid is not None and process_gone(pid, timeout=0)


async def test_a_broker_that_cannot_start_reports_its_output() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))  # bound, not listening: connects are refused at once
        port = taken.getsockname()[1]
        with pytest.raises(BrokerError) as caught:
            await EmbeddedBroker(port=port, startup_timeout=10).start()
    assert "Address in use" in str(caught.value)


_CHILD = """
import asyncio, sys
from topoplace.dev.broker import EmbeddedBroker

async def main() -> None:
    broker = EmbeddedBroker()
    await broker.start()
    print(broker.pid, flush=True)
    closed = asyncio.Event()  # stdin at EOF: return without calling stop()
    asyncio.get_running_loop().add_reader(sys.stdin.fileno(), closed.set)
    await closed.wait()

asyncio.run(main())
"""


@pytest.mark.parametrize("ending", ["SIGKILL", "SIGTERM", "SIGINT", "exit without stop"])
def test_broker_dies_with_its_parent(ending: str) -> None:
    parent = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None and parent.stdin is not None
        broker_pid = int(parent.stdout.readline())
        assert not process_gone(broker_pid, timeout=0)
        if ending == "exit without stop":
            parent.stdin.close()
        else:
            parent.send_signal(getattr(signal, ending))
        parent.wait(timeout=10)
        assert process_gone(broker_pid, timeout=5), f"broker {broker_pid} outlived its parent ({ending})"
    finally:
        parent.kill()
        parent.wait()


async def test_ensure_topics_creates_every_topic_and_dlq_with_its_policy(kafka_bootstrap: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        assert set(schemas.topics.all_topic_names(with_dlq=True)) <= existing
        described = {
            t["topic"]: len(t["partitions"]) for t in await admin.describe_topics([t.name for t in schemas.topics.ALL])
        }
        assert described == {t.name: t.partitions for t in schemas.topics.ALL}
        responses = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, t.name) for t in schemas.topics.ALL]
        )
        policy = {
            resource[3]: {entry[0]: entry[1] for entry in resource[4]}.get("cleanup.policy")
            for response in responses
            for resource in response.resources
        }
        assert policy == {t.name: "compact" if t.compacted else "delete" for t in schemas.topics.ALL}
    finally:
        await admin.close()


async def test_ensure_topics_is_idempotent(kafka_bootstrap: str) -> None:
    topic = unique_topic(events.BindingEvent, partitions=2)
    await ensure_topics(kafka_bootstrap, [topic])
    await ensure_topics(kafka_bootstrap, [topic])  # a second run must not fail
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        names = await admin.list_topics()
        assert names.count(topic.name) == 1 and names.count(topic.dlq) == 1
    finally:
        await admin.close()


async def test_ensure_topics_without_dlq(kafka_bootstrap: str) -> None:
    topic = unique_topic(events.BindingEvent)
    await ensure_topics(kafka_bootstrap, [topic], with_dlq=False)
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        names = set(await admin.list_topics())
    finally:
        await admin.close()
    assert topic.name in names and topic.dlq not in names
