"""Every command keeps the CLI's promise (0 did it, 1 the answer is no, 2 bad input): with no broker,
with ports no socket can have, with an address not this machine's, and with stdout's reader gone, it
says one line on stderr and never a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def run(*args: str, env: dict[str, str] | None = None, stdout: int | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("KAFKA_BOOTSTRAP", "TOPOPLACE_EMBEDDED_BROKER")}
    return subprocess.run(
        [sys.executable, "-m", "topoplace.cli", *args],
        cwd=ROOT,
        env={**base, **(env or {})},
        stdout=subprocess.PIPE if stdout is None else stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )


@pytest.fixture
def dead_port() -> Iterator[int]:
    """A loopback port nothing listens on (bound, never listening: connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    "args",
    [("topics", "tail", "placements"), ("topics", "ensure"), ("explain", "default/some-pod")],
    ids=lambda a: " ".join(a),
)
def test_a_command_that_meets_no_broker_says_so_in_one_line_and_exits_1(args: tuple[str, ...], dead_port: int) -> None:
    result = run(*args, env={"KAFKA_BOOTSTRAP": f"127.0.0.1:{dead_port}"})
    assert result.returncode == 1
    assert f"127.0.0.1:{dead_port}" in one_line(result)


@pytest.mark.parametrize("command", [("broker",), ("kube-api", "serve")], ids=" ".join)
@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_a_port_no_socket_can_have_is_refused_before_anything_starts(command: tuple[str, ...], port: str) -> None:
    result = run(*command, "--port", port)
    assert result.returncode == 2
    assert "--port" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("command", [("broker",), ("kube-api", "serve")], ids=" ".join)
def test_an_address_not_of_this_machine_is_bad_input_in_one_line(command: tuple[str, ...]) -> None:
    # 192.0.2.0/24 is TEST-NET-1 (RFC 5737): never an address of this machine, and nothing is sent to it.
    result = run(*command, "--host", "192.0.2.1")
    assert result.returncode == 2
    assert "192.0.2.1" in one_line(result)


def test_a_port_already_taken_is_bad_input_in_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("kube-api", "serve", "--port", str(port))
    assert result.returncode == 2
    assert str(port) in one_line(result)


@pytest.mark.parametrize(
    "args",
    [
        ("engine", "pick", "--topology", "dgx-h100", "--count", "2"),
        ("engine", "place", "--snapshot", str(EXAMPLES / "snapshot-nvidia-cluster.json"), "--explain"),
        ("topo", "show", "--topology", "dgx-h100"),
        ("topics", "list"),
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_a_reader_that_went_away_ends_the_command_quietly(args: tuple[str, ...]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # as `… | head` does once it has read enough: every write meets a closed pipe
    try:
        result = run(*args, stdout=write_end)
    finally:
        os.close(write_end)
    assert "Traceback" not in result.stderr and result.stderr.strip() == "", result.stderr
    assert result.returncode in (0, 1)


@pytest.mark.parametrize(
    "args", [("collector", "cluster"), ("collector", "node", "--node", "n1", "--source", "dgx-h100")]
)
def test_a_collector_without_kafka_says_so_before_it_says_it_started(args: tuple[str, ...]) -> None:
    result = run(*args, env={"TOPOPLACE_LOG_LEVEL": "info"})
    assert result.returncode == 2
    assert "KAFKA_BOOTSTRAP" in one_line(result)
    assert "started" not in result.stdout + result.stderr
