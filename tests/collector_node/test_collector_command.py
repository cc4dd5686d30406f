"""`topoplace collector ...`: the subcommands, the fixture list, and signals stopping a service."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal

import pytest

from services.collector.node.topology_files import fixture_names, fixture_source
from topoplace.commands import collector


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="topoplace")
    collector.add_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_node_subcommand_arguments() -> None:
    args = parse(["collector", "node", "--node", "gpu-1", "--source", "dgx-h100", "--interval", "2.5", "--model", "M"])
    assert (args.node, args.source, args.interval, args.model, args.memory_mib) == ("gpu-1", "dgx-h100", 2.5, "M", None)
    assert callable(args.func)


def test_cluster_subcommand_arguments() -> None:
    args = parse(["collector", "cluster", "--resync", "60", "--hypernodes-file", "tree.yaml"])
    assert (args.resync, args.hypernodes_file) == (60.0, "tree.yaml")


@pytest.mark.parametrize("interval", ["0", "-1", "soon"])
def test_interval_must_be_a_positive_number(interval: str) -> None:
    with pytest.raises(SystemExit):
        parse(["collector", "node", "--node", "n", "--source", "dgx-h100", "--interval", interval])


def test_fixtures_lists_every_fixture_with_its_source(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse(["collector", "fixtures"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    for name in fixture_names():
        assert f"{name}: " in out
        assert f"source: {fixture_source(name)}" in out


def test_an_unreadable_source_exits_2_with_the_reason(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP", "127.0.0.1:9")
    args = parse(["collector", "node", "--node", "n", "--source", "no-such-machine"])
    assert args.func(args) == 2
    assert "no-such-machine" in capsys.readouterr().err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_sets_the_stop_event(sig: signal.Signals) -> None:
    seen: list[bool] = []

    async def service(stop: asyncio.Event) -> None:
        os.kill(os.getpid(), sig)
        await asyncio.wait_for(stop.wait(), 10)
        seen.append(stop.is_set())

    collector.run_until_signalled(service)
    assert seen == [True]
