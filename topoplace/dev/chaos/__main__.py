"""`python -m topoplace.dev.chaos`: one bounded chaos run; writes chaos-report.json; exit 0 only when it
converged with no violation."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import msgspec

from topoplace.dev.chaos import report
from topoplace.dev.chaos.harness import ChaosOptions, run_chaos


def main(argv: list[str] | None = None) -> int:
    defaults = ChaosOptions()
    parser = argparse.ArgumentParser(prog="python -m topoplace.dev.chaos", description=__doc__)
    parser.add_argument("--pods", type=int, default=defaults.pods, help="single pods (gang members come on top)")
    parser.add_argument("--gangs", type=int, default=defaults.gangs)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--rounds", type=int, default=defaults.rounds, help="each process fault this many times")
    parser.add_argument("--api-fault-rate", type=float, default=defaults.api_fault_rate)
    parser.add_argument("--submit-rate", type=float, default=defaults.submit_rate_per_s, help="pods per second")
    parser.add_argument("--converge-timeout", type=float, default=defaults.converge_timeout_s)
    parser.add_argument("--churn", type=float, default=defaults.churn, help="chance a submission deletes an old pod")
    parser.add_argument("--placers", type=int, default=defaults.placers)
    parser.add_argument("--binders", type=int, default=defaults.binders)
    parser.add_argument("--no-process-faults", action="store_true", help="API faults only")
    parser.add_argument("--no-hostile", action="store_true", help="no hostile tenant or topic producer")
    parser.add_argument("--work-dir", type=Path, default=defaults.work_dir, help="service logs")
    parser.add_argument("--report", type=Path, default=Path("chaos-report.json"))
    args = parser.parse_args(argv)
    options = ChaosOptions(
        pods=args.pods,
        gangs=args.gangs,
        seed=args.seed,
        rounds=args.rounds,
        api_fault_rate=args.api_fault_rate,
        submit_rate_per_s=args.submit_rate,
        converge_timeout_s=args.converge_timeout,
        churn=args.churn,
        placers=args.placers,
        binders=args.binders,
        process_faults=not args.no_process_faults,
        hostile=not args.no_hostile,
        work_dir=args.work_dir,
    )
    result = asyncio.run(run_chaos(options))
    report.write(result, args.report)
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(result), indent=2).decode() + "\n")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
