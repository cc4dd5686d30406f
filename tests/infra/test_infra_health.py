"""HealthServer: liveness, readiness that follows the check, and Prometheus metrics."""

from __future__ import annotations

import aiohttp
import pytest

from topoplace.health import HealthServer
from topoplace.kafka_io import MESSAGES_CONSUMED


async def test_endpoints_follow_readiness_and_serve_metrics() -> None:
    ready = False
    server = HealthServer(0, ready=lambda: ready, host="127.0.0.1")
    port = await server.start()
    assert port > 0
    MESSAGES_CONSUMED.labels(topic="health.test", service="test-health").inc()
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/healthz") as response:
                assert response.status == 200
            async with http.get(f"{base}/readyz") as response:
                assert response.status == 503
            ready = True
            async with http.get(f"{base}/readyz") as response:
                assert response.status == 200
            async with http.get(f"{base}/metrics") as response:
                assert response.status == 200
                assert response.headers["Content-Type"].startswith("text/plain")
                body = await response.text()
            assert 'topoplace_messages_consumed_total{service="test-health",topic="health.test"} 1.0' in body
            async with http.get(f"{base}/nothing") as response:
                assert response.status == 404
    finally:
        await server.stop()
    http = aiohttp.ClientSession()
    try:
        with pytest.raises(aiohttp.ClientConnectionError):
            await http.get(f"{base}/healthz")
    finally:
        await http.close()


async def test_a_readiness_check_that_raises_means_not_ready_with_the_reason() -> None:
    def broken() -> bool:
        raise LookupError("no topology yet")

    server = HealthServer(0, ready=broken, host="127.0.0.1")
    port = await server.start()
    try:
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/readyz") as response:
            assert response.status == 503
            assert "no topology yet" in await response.text()
    finally:
        await server.stop()


async def test_not_ready_says_why_when_told() -> None:
    why: list[str | None] = ["catching up on topology.nodes/0 at 3 of 9"]
    server = HealthServer(0, ready=lambda: why[0] is None, reason=lambda: why[0], host="127.0.0.1")
    port = await server.start()
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                assert response.status == 503
                assert await response.text() == "not ready: catching up on topology.nodes/0 at 3 of 9\n"
            why[0] = None
            async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                assert response.status == 200
    finally:
        await server.stop()


async def test_a_taken_port_fails_start() -> None:
    first = HealthServer(0, ready=lambda: True, host="127.0.0.1")
    port = await first.start()
    try:
        with pytest.raises(OSError):
            await HealthServer(port, ready=lambda: True, host="127.0.0.1").start()
    finally:
        await first.stop()
