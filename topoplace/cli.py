"""`topoplace` console script: one subcommand per module in topoplace.commands."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from topoplace.config import ConfigError

# Each module exposes `add_parser(subparsers)`, which registers its subcommand(s)
# and sets `func(args) -> int` as the parser default.
COMMAND_MODULES: tuple[str, ...] = (
    "topoplace.commands.broker",
    "topoplace.commands.kube_api",
    "topoplace.commands.collector",
    "topoplace.commands.placer",
    "topoplace.commands.binder",
    "topoplace.commands.engine",
    "topoplace.commands.topo",
    "topoplace.commands.schemas",
    "topoplace.commands.demo",
    "topoplace.commands.workload",
    "topoplace.commands.topics",
    "topoplace.commands.explain",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="topoplace", description="Topology-aware placement of GPUs and other accelerators on Kubernetes."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:  # a setting no command can run with: say which, not a traceback
        print(f"topoplace {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
