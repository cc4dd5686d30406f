"""`topoplace placer`: its arguments, and a real process that decides and stops on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import aiohttp
import pytest
from placer_builders import pending, status, topology
from placer_kafka import TIMEOUT_S, Recorder

from schemas import topics
from schemas.events import PlacementOutcome
from topoplace.cli import build_parser
from topoplace.dev.broker import free_port
from topoplace.kafka.producer import EventProducer


def test_mode_defaults_to_default_and_accepts_hami() -> None:
    parser = build_parser()
    assert parser.parse_args(["placer"]).mode == "default"
    args = parser.parse_args(["placer", "--mode", "hami"])
    assert args.mode == "hami" and callable(args.func)


def test_unknown_mode_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["placer", "--mode", "fastest"])
    assert "--mode" in capsys.readouterr().err


def test_bad_configuration_exits_2_with_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TOPOPLACE_HEALTH_PORT", "not-a-port")
    args = build_parser().parse_args(["placer"])
    assert args.func(args) == 2
    assert "TOPOPLACE_HEALTH_PORT" in capsys.readouterr().err


async def test_process_decides_then_stops_on_sigterm(fresh_broker: str) -> None:
    # The embedded broker serves no idempotent producer (an external Kafka would).
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP": fresh_broker,
        "TOPOPLACE_KAFKA_IDEMPOTENCE": "false",
        "TOPOPLACE_GROUP_PREFIX": "placer-cli-test",
    }
    async with (
        EventProducer(fresh_broker, service="test") as producer,
        Recorder(fresh_broker, [topics.PLACEMENTS]) as rec,
    ):
        await producer.send(topics.TOPOLOGY_NODES, "a", topology("a", 2))
        await producer.send(topics.NODES_STATUS, "a", status("a"))
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "topoplace.cli", "placer", "--mode", "hami",
            env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            await producer.send(topics.PODS_PENDING, "p", pending("p", 1))
            await rec.wait_for(lambda: len(rec.placements()) >= 1, "the process's decision")
            assert rec.placements()[0].outcome is PlacementOutcome.PLACED
            process.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.wait_for(process.communicate(), TIMEOUT_S)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert process.returncode == 0, stderr.decode()[-2000:]
    assert b'"placer.stopped"' in stderr


def test_no_kafka_configured_exits_2_naming_both_ways(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # No private broker behind the operator's back: a service needs Kafka, or the explicit setting.
    monkeypatch.delenv("KAFKA_BOOTSTRAP", raising=False)
    monkeypatch.delenv("TOPOPLACE_EMBEDDED_BROKER", raising=False)
    args = build_parser().parse_args(["placer"])
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert "KAFKA_BOOTSTRAP" in err and "TOPOPLACE_EMBEDDED_BROKER" in err


async def test_unreachable_kafka_is_retried_says_why_not_ready_and_stops_without_a_traceback() -> None:
    health_port = free_port()
    env = {**os.environ, "KAFKA_BOOTSTRAP": f"127.0.0.1:{free_port()}", "TOPOPLACE_HEALTH_PORT": str(health_port)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "topoplace.cli", "placer",
        env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    seen: list[bytes] = []
    try:
        # The second restart proves it retries; by then /readyz logs the reason.
        while sum(b'"service.kafka_loop_restart"' in line for line in seen) < 2:
            line = await asyncio.wait_for(process.stderr.readline(), TIMEOUT_S)
            assert line, b"".join(seen).decode()[-2000:]
            seen.append(line)
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{health_port}/readyz") as response,
        ):
            status_code, text = response.status, await response.text()
        process.send_signal(signal.SIGTERM)
        rest = await asyncio.wait_for(process.stderr.read(), TIMEOUT_S)
        await asyncio.wait_for(process.wait(), TIMEOUT_S)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    output = (b"".join(seen) + rest).decode()
    assert process.returncode == 0, output[-2000:]
    assert "Traceback" not in output
    assert status_code == 503
    assert text == "not ready\n"  # the probe learns the verdict; the reason is in the log
    assert '"health.not_ready"' in output and "KafkaConnectionError" in output
