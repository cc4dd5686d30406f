"""`topoplace collector node|cluster|fixtures`: the collector's two services and its fixture list."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from topoplace.commands.options import positive_float, positive_int
from topoplace.commands.signals import run_until_signalled
from topoplace.config import Settings

if TYPE_CHECKING:  # imported by the command that runs: building the parser stays cheap
    import asyncio


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("collector", help="run the node agent or the cluster watcher")
    sub = parser.add_subparsers(dest="collector_command", required=True)

    node = sub.add_parser("node", help="publish one node's device topology and usage")
    node.add_argument("--node", required=True, help="the Kubernetes node name (message key)")
    node.add_argument(
        "--source",
        required=True,
        help="'nvml', a shipped fixture name (see `topoplace collector fixtures`), "
        "or a file: a JSON fixture or a `nvidia-smi topo -m` print",
    )
    node.add_argument("--interval", type=positive_float, default=10.0, help="seconds between usage reports")
    node.add_argument("--model", default=None, help="GPU model of a topo print (sets the device memory too)")
    node.add_argument("--memory-mib", type=positive_int, default=None, help="device memory of a topo print, in MiB")
    node.set_defaults(func=_run_node)

    cluster = sub.add_parser("cluster", help="watch pods, nodes and HyperNodes of the cluster")
    cluster.add_argument("--resync", type=positive_float, default=300.0, help="seconds between full relists")
    cluster.add_argument("--hypernodes-file", default=None, help="a YAML/JSON file of HyperNodes to publish")
    cluster.set_defaults(func=_run_cluster)

    fleet = sub.add_parser("fleet", help="publish many simulated nodes from one process")
    fleet.add_argument("--fleet", required=True, help='a JSON file: {"members": [{"node": ..., "source": ...}]}')
    fleet.add_argument("--interval", type=positive_float, default=10.0, help="seconds between usage reports")
    fleet.set_defaults(func=_run_fleet)

    fixtures = sub.add_parser("fixtures", help="list the shipped topology fixtures and their sources")
    fixtures.set_defaults(func=_list_fixtures)


def _run_node(args: argparse.Namespace) -> int:
    from services.collector.node.agent import run_node_agent

    settings = Settings.from_env()

    async def main(stop: asyncio.Event) -> None:
        await run_node_agent(
            settings,
            node=args.node,
            source=args.source,
            interval_seconds=args.interval,
            stop=stop,
            model=args.model,
            memory_mib=args.memory_mib,
        )

    return _publish_until_signalled("node", main)


def _run_fleet(args: argparse.Namespace) -> int:
    from services.collector.node.fleet import FleetError, load_fleet, run_fleet

    settings = Settings.from_env()
    try:
        fleet = load_fleet(args.fleet)
    except FleetError as exc:
        print(f"topoplace collector fleet: {exc}", file=sys.stderr)
        return 2

    async def main(stop: asyncio.Event) -> None:
        await run_fleet(settings, fleet, interval_seconds=args.interval, stop=stop)

    return _publish_until_signalled("fleet", main)


def _publish_until_signalled(command: str, main: Callable[[asyncio.Event], Awaitable[None]]) -> int:
    """Run a node publisher; a device source that cannot be read is one line and exit code 2."""
    from services.collector.node.agent import SOURCE_ERRORS

    try:
        run_until_signalled(main)
    except SOURCE_ERRORS as exc:
        print(f"topoplace collector {command}: {exc}", file=sys.stderr)
        return 2
    return 0


def _run_cluster(args: argparse.Namespace) -> int:
    from services.collector.cluster.service import run_cluster_watcher

    settings = Settings.from_env()

    async def main(stop: asyncio.Event) -> None:
        await run_cluster_watcher(settings, resync_seconds=args.resync, hypernodes_file=args.hypernodes_file, stop=stop)

    run_until_signalled(main)
    return 0


def _list_fixtures(args: argparse.Namespace) -> int:
    from services.collector.node.topology_files import fixture_names, fixture_note, fixture_source, load_topology

    for name in fixture_names():
        topology = load_topology(name)
        first = topology.devices[0]
        print(f"{name}: {len(topology.devices)} x {first.model} ({first.vendor.value}, {first.memory_mib} MiB)")
        print(f"    source: {fixture_source(name)}")
        note = fixture_note(name)
        if note:
            print(f"    note: {note}")
    return 0
