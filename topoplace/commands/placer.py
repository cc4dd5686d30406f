"""`topoplace placer [--mode default|hami]`: run one placer replica until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import sys

from topoplace.commands.signals import run_until_signalled
from topoplace.config import ConfigError, Settings


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "placer",
        help="decide a node and devices for every pending pod",
        description="Rebuilds its view from the topics on KAFKA_BOOTSTRAP, then decides pods.pending "
        "into placements. Serves /healthz, /readyz and /metrics on TOPOPLACE_HEALTH_PORT.",
    )
    parser.add_argument(
        "--mode",
        choices=("default", "hami"),
        default="default",
        help="engine mode: default (exact optimum) or hami (HAMi's choices, ties included)",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from engine import Mode
    from services.placer.service import run_placer
    from topoplace.gc_tuning import freeze_long_lived, tune_collector

    try:
        settings = Settings.from_env()
        mode = Mode(args.mode)
        tune_collector()  # no full collection inside a decision: see topoplace/gc_tuning.py
        run_until_signalled(lambda stop: run_placer(settings, mode=mode, stop=stop, on_caught_up=freeze_long_lived))
    except ConfigError as exc:
        print(f"topoplace placer: {exc}", file=sys.stderr)
        return 2
    return 0
