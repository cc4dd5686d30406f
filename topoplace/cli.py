"""`topoplace` console script: one subcommand per module in topoplace.commands or topoplace.dev.commands."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from topoplace.commands.failures import failure_line, reader_gone
from topoplace.config import ConfigError

# Each module exposes `add_parser(subparsers)`, which registers its subcommand(s)
# and sets `func(args) -> int` as the parser default.
COMMAND_MODULES: tuple[str, ...] = (
    "topoplace.dev.commands.broker",
    "topoplace.dev.commands.kube_api",
    "topoplace.commands.collector",
    "topoplace.commands.placer",
    "topoplace.commands.binder",
    "topoplace.commands.engine",
    "topoplace.commands.topo",
    "topoplace.commands.schemas",
    "topoplace.dev.commands.demo",
    "topoplace.dev.commands.workload",
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
    # A one-shot command sets up no logging: its clients' warnings (aiokafka's "Unable connect to …")
    # must not reach stderr through Python's last-resort handler, beside the one line it prints.
    # Services set up their own handlers, which this does not touch.
    logging.getLogger().addHandler(logging.NullHandler())
    args = build_parser().parse_args(argv)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except ConfigError as exc:  # a setting no command can run with: say which, not a traceback
        print(f"topoplace {args.command}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return reader_gone()
    except Exception as exc:
        said = failure_line(args, exc)
        if said is None:
            raise  # a bug: its traceback is the report
        print(f"topoplace {args.command}: {said[1]}", file=sys.stderr)
        return said[0]


if __name__ == "__main__":
    sys.exit(main())
