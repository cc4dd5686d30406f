"""The cluster watcher's /readyz names the dependency that fails: the API server is not the broker."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator

import aiohttp
import pytest
from decision_keys import TEST_KEY_SECRET

from services.collector.cluster.service import run_cluster_watcher
from topoplace.config import Settings
from topoplace.dev.broker import EmbeddedBroker, free_port
from topoplace.dev.kubeapi import KubeApiServer
from topoplace.kafka.admin import ensure_topics

WAIT = 30.0  # seconds; met in a few when things work


@pytest.fixture(scope="module")
def own_broker() -> Iterator[str]:
    # A broker of its own: the watcher reconciles the compacted topics with its (empty) cluster,
    # and would report other tests' pods and nodes as deleted.
    broker = EmbeddedBroker()
    bootstrap = asyncio.run(broker.start())
    try:
        asyncio.run(ensure_topics(bootstrap))
        yield bootstrap
    finally:
        asyncio.run(broker.stop())


async def readyz_until(port: int, status: int) -> None:
    """Asks /readyz until it answers `status` (a probe's view of the service), within WAIT."""
    deadline = time.monotonic() + WAIT
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.get(f"http://127.0.0.1:{port}/readyz") as reply:
                    if reply.status == status:
                        return
            except aiohttp.ClientConnectionError:
                pass  # the health server is not up yet
            assert time.monotonic() < deadline, f"/readyz never answered {status}"
            await asyncio.sleep(0.1)  # a probe's period, not synchronisation: the answer is what is waited on


def not_ready_reasons(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.fields["reason"] for r in caplog.records if r.getMessage() == "health.not_ready"]  # type: ignore[attr-defined]


async def test_readiness_names_the_api_server_when_it_is_away_and_recovers_with_it(
    own_broker: str, caplog: pytest.LogCaptureFixture
) -> None:
    api_port, health_port = free_port(), free_port()
    kube_api = KubeApiServer(port=api_port, bookmark_interval=0.5)
    await kube_api.start()
    settings = Settings(
        kafka_bootstrap=own_broker,
        kube_api_url=kube_api.url,
        health_port=health_port,
        decision_key=TEST_KEY_SECRET,
    )
    stop = asyncio.Event()
    caplog.set_level(logging.INFO, logger="topoplace.health")
    watcher = asyncio.create_task(run_cluster_watcher(settings, resync_seconds=60, stop=stop))
    try:
        await readyz_until(health_port, 200)
        caplog.clear()
        await kube_api.stop()
        # every informer's watch ends with the server and its next list fails: the watcher is not ready,
        # and says the API server is why, not Kafka
        deadline = time.monotonic() + WAIT
        while not any(r.startswith("the API server: ") for r in not_ready_reasons(caplog)):
            assert time.monotonic() < deadline, not_ready_reasons(caplog)
            await readyz_until(health_port, 503)
        assert not any("Kafka" in reason for reason in not_ready_reasons(caplog)), not_ready_reasons(caplog)

        await kube_api.start()  # the same port: the watcher's address for it is unchanged
        await readyz_until(health_port, 200)
        assert not watcher.done()
    finally:
        stop.set()
        await asyncio.wait_for(watcher, WAIT)
        await kube_api.stop()
