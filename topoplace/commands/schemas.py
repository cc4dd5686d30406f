"""`topoplace schemas generate|check`: the JSON Schema of every topic."""

from __future__ import annotations

import argparse
import sys


def _generate(args: argparse.Namespace) -> int:
    from schemas import generate

    for path in generate.write():
        print(path.name)
    return 0


def _check(args: argparse.Namespace) -> int:
    from schemas import generate

    stale = generate.drift()
    if stale:
        print("schemas out of date (run `topoplace schemas generate`): " + ", ".join(stale), file=sys.stderr)
        return 1
    print("schemas up to date")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("schemas", help="generate or check the topics' JSON Schema")
    sub = parser.add_subparsers(dest="schemas_command", required=True)
    sub.add_parser("generate", help="write schemas/json/*.schema.json").set_defaults(func=_generate)
    sub.add_parser("check", help="fail when the checked-in schemas drift from the code").set_defaults(func=_check)
