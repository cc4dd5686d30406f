"""HealthServer: liveness, readiness that follows the check, and Prometheus metrics."""

from __future__ import annotations

import logging

import aiohttp
import pytest

from topoplace.health import HealthServer
from topoplace.kafka.records import MESSAGES_CONSUMED


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


async def test_a_readiness_check_that_raises_is_not_ready_and_serves_none_of_its_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Anyone who reaches the port must learn nothing internal (finding 11): the error goes to the log only.
    def broken() -> bool:
        raise LookupError("no topology yet from kafka-0.kafka.svc:9093 as user topoplace-placer")

    server = HealthServer(0, ready=broken, host="127.0.0.1")
    port = await server.start()
    try:
        with caplog.at_level(logging.INFO, logger="topoplace.health"):
            async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/readyz") as response:
                assert response.status == 503
                assert await response.text() == "not ready\n"
    finally:
        await server.stop()
    (record,) = [r for r in caplog.records if r.getMessage() == "health.not_ready"]
    assert "LookupError" in record.fields["reason"] and "kafka-0.kafka.svc:9093" in record.fields["reason"]  # type: ignore[attr-defined]


async def test_not_ready_logs_why_once_per_change_and_serves_only_the_verdict(
    caplog: pytest.LogCaptureFixture,
) -> None:
    why: list[str | None] = ["catching up on topology.nodes/0 at 3 of 9"]
    server = HealthServer(0, ready=lambda: why[0] is None, reason=lambda: why[0], host="127.0.0.1")
    port = await server.start()
    try:
        with caplog.at_level(logging.INFO, logger="topoplace.health"):
            async with aiohttp.ClientSession() as http:
                for _ in range(3):  # the kubelet probes every few seconds: one log line, not three
                    async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                        assert response.status == 503
                        assert await response.text() == "not ready\n"
                why[0] = "Kafka: KafkaConnectionError: 10.0.0.7:9093 (reconnecting)"
                async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                    assert await response.text() == "not ready\n"
                why[0] = None
                async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                    assert response.status == 200
                    assert await response.text() == "ready\n"
    finally:
        await server.stop()
    logged = [r.fields["reason"] for r in caplog.records if r.getMessage() == "health.not_ready"]  # type: ignore[attr-defined]
    assert logged == [
        "catching up on topology.nodes/0 at 3 of 9",
        "Kafka: KafkaConnectionError: 10.0.0.7:9093 (reconnecting)",
    ]


async def test_a_taken_port_fails_start() -> None:
    first = HealthServer(0, ready=lambda: True, host="127.0.0.1")
    port = await first.start()
    try:
        with pytest.raises(OSError):
            await HealthServer(port, ready=lambda: True, host="127.0.0.1").start()
    finally:
        await first.stop()
