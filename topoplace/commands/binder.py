"""`topoplace binder`: apply placements to the cluster until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from topoplace.commands.signals import run_until_signalled
from topoplace.config import ConfigError, Settings

if TYPE_CHECKING:  # imported by the command that runs: building the parser stays cheap
    import asyncio


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "binder",
        help="bind pods as the placements say (annotations + pods/binding + Events), report on `bindings`",
        description="Configured by the environment: KAFKA_BOOTSTRAP, TOPOPLACE_KUBE_API_URL or KUBECONFIG, "
        "TOPOPLACE_HEALTH_PORT, TOPOPLACE_TRACES_FILE / OTEL_EXPORTER_OTLP_*, TOPOPLACE_SCHEDULER_NAME.",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        settings = Settings.from_env()
        run_until_signalled(lambda stop: _serve(settings, stop))
    except ConfigError as exc:  # a bad or missing variable: say which, no traceback
        print(f"topoplace binder: {exc}", file=sys.stderr)
        return 2
    return 0


async def _serve(settings: Settings, stop: asyncio.Event) -> None:
    # Imported here: the service pulls in Kafka, Kubernetes and OpenTelemetry, which
    # `topoplace --help` and the other subcommands do not need.
    from services.binder.service import run_binder
    from topoplace import telemetry

    try:
        await run_binder(settings, stop=stop)
    finally:
        telemetry.shutdown_tracing()
