"""`topoplace demo`: the whole pipeline, end to end, on the embedded defaults."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from topoplace.commands.exit_codes import BAD_INPUT
from topoplace.commands.options import positive_float, positive_int


def _run(args: argparse.Namespace) -> int:
    problem = check_outputs(args)
    if problem:
        print(f"topoplace demo: {problem}", file=sys.stderr)
        return BAD_INPUT
    import asyncio

    from aiokafka.errors import KafkaError
    from rich.console import Console

    from topoplace.config import Settings
    from topoplace.dev.demo.runner import DemoOptions, run_demo
    from topoplace.kafka.admin import BrokerError

    options = DemoOptions(
        pods=args.pods,
        seed=args.seed,
        rate_per_s=args.rate,
        timeout_s=args.timeout,
        mode=args.mode,
        report_path=Path(args.report),
        traces_path=Path(args.traces),
        work_dir=Path(args.work_dir),
    )
    settings = Settings.from_env()
    try:
        return asyncio.run(run_demo(options, settings, Console()))
    except (KafkaError, BrokerError) as exc:  # the named Kafka is away: one line, no traceback
        where = settings.kafka_bootstrap or "the embedded broker"
        print(f"topoplace demo: Kafka at {where}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def check_outputs(args: argparse.Namespace) -> str:
    """What is wrong with the output paths, naming the option ("" when nothing): checked before anything
    starts, so a demo of minutes does not end on a file it cannot write. Numbers are checked by argparse."""
    for option, value in (("--report", args.report), ("--traces", args.traces)):
        problem = unwritable(Path(value))
        if problem:
            return f"{option}: cannot write {value}: {problem}"
    work_dir = Path(args.work_dir)
    if work_dir.exists() and not work_dir.is_dir():
        return f"--work-dir: {args.work_dir} is a file, not a folder"
    return ""


def unwritable(path: Path) -> str:
    """Why `path` cannot be written as a file ("" when it can), without creating it."""
    if path.is_dir():
        return "it is a folder"
    if path.exists():
        return "" if os.access(path, os.W_OK) else "permission denied"
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        return f"no folder {folder}"
    return "" if os.access(folder, os.W_OK | os.X_OK) else f"permission denied in {folder}"


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("demo", help="run the whole pipeline on the embedded broker and test cluster")
    parser.add_argument("--pods", type=positive_int, default=200, help="how many pods to submit (default 200)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the workload's order")
    parser.add_argument("--rate", type=positive_float, default=50.0, help="pods submitted per second")
    parser.add_argument("--timeout", type=positive_float, default=240.0, help="seconds for every pod to be decided")
    parser.add_argument("--mode", choices=("default", "hami"), default="default", help="engine mode of the placer")
    parser.add_argument("--report", default="demo-report.json")
    parser.add_argument("--traces", default="demo-traces.jsonl")
    parser.add_argument("--work-dir", default=".demo", help="service logs and per-service trace files")
    parser.set_defaults(func=_run)
