"""`topoplace broker`: address on the first stdout line, topics created, clean stop on signals."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from infra_helpers import process_gone

import schemas.topics

# Only this command's module, so the test does not depend on the other subcommands importing.
_MAIN = """
import argparse, sys
from topoplace.dev.commands import broker
parser = argparse.ArgumentParser(prog="topoplace")
broker.add_parser(parser.add_subparsers(required=True))
args = parser.parse_args(sys.argv[1:])
sys.exit(args.func(args))
"""


def children_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_prints_address_creates_topics_and_stops_on_signal(stop_signal: signal.Signals) -> None:
    command = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _MAIN, "broker", stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert command.stdout is not None
        first_line = await asyncio.wait_for(command.stdout.readline(), 20)
        bootstrap = first_line.decode().strip()
        host, _, port = bootstrap.rpartition(":")
        assert host == "127.0.0.1" and port.isdigit()
        (broker_pid,) = children_of(command.pid)

        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            assert set(schemas.topics.all_topic_names(with_dlq=True)) <= set(await admin.list_topics())
        finally:
            await admin.close()

        command.send_signal(stop_signal)
        out, err = await asyncio.wait_for(command.communicate(), 10)
        assert command.returncode == 0, err.decode()
        assert out == b""  # nothing after the address line
        assert process_gone(broker_pid, timeout=0)
    finally:
        if command.returncode is None:
            command.kill()
            await command.wait()


def test_topics_ensure_on_an_unreachable_kafka_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from topoplace.cli import main
    from topoplace.dev.broker import free_port

    address = f"127.0.0.1:{free_port()}"
    monkeypatch.setenv("KAFKA_BOOTSTRAP", address)
    assert main(["topics", "ensure"]) == 1
    err = capsys.readouterr().err
    assert f"topoplace topics ensure: {address}: KafkaConnectionError" in err
    assert "Traceback" not in err
