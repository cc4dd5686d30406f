"""`topoplace kube-api serve`: run the test Kubernetes API server until interrupted."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from topoplace.commands.signals import run_until_signalled

if TYPE_CHECKING:  # imported by the command that runs: building the parser stays cheap
    import asyncio


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("kube-api", help="a small Kubernetes API server for tests and demos")
    sub = parser.add_subparsers(dest="kube_api_command", required=True)
    serve = sub.add_parser("serve", help="serve until SIGINT/SIGTERM; the first stdout line is the URL")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    serve.add_argument("--bookmark-interval", type=float, default=10.0, help="seconds between watch bookmarks")
    serve.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    run_until_signalled(lambda stop: _serve_until_stopped(args.host, args.port, args.bookmark_interval, stop))
    return 0


async def _serve_until_stopped(host: str, port: int, bookmark_interval: float, stop: asyncio.Event) -> None:
    from topoplace.kubeapi import KubeApiServer

    async with KubeApiServer(host, port, bookmark_interval=bookmark_interval) as server:
        print(server.url, flush=True)  # the first line: scripts read the URL from it
        print("serving core/v1 nodes, pods, pods/binding, events and topology.volcano.sh hypernodes", file=sys.stderr)
        await stop.wait()
