"""`topoplace kube-api serve`: run the test Kubernetes API server until interrupted."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from topoplace.commands.options import port_number
from topoplace.commands.signals import run_until_signalled
from topoplace.config import ConfigError

if TYPE_CHECKING:  # imported by the command that runs: building the parser stays cheap
    import asyncio

    from topoplace.dev.kubeapi import KubeApiServer

# The fault kinds and verbs of topoplace.dev.kubeapi.faults (a test keeps the two lists equal).
FAULT_KINDS = ("429", "500", "503", "timeout", "reset", "lost")
FAULT_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")

SERVES = (
    "core/v1 nodes, pods, pods/binding, events, persistentvolumeclaims, persistentvolumes; "
    "events.k8s.io/v1 events; storage.k8s.io/v1 storageclasses; "
    "scheduling.volcano.sh/v1beta1 podgroups; topology.volcano.sh/v1alpha1 hypernodes; "
    "kueue.x-k8s.io/v1beta2,v1beta1 topologies; resource.k8s.io/v1 resourceslices, resourceclaims, "
    "resourceclaimtemplates, deviceclasses"
)


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("kube-api", help="a small Kubernetes API server for tests and demos")
    sub = parser.add_subparsers(dest="kube_api_command", required=True)
    serve = sub.add_parser("serve", help="serve until SIGINT/SIGTERM; the first stdout line is the URL")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=port_number, default=0, help="0 = pick a free port")
    serve.add_argument("--bookmark-interval", type=float, default=10.0, help="seconds between watch bookmarks")
    serve.add_argument("--no-claim-controller", action="store_true", help="do not create claims from templates")
    serve.add_argument("--no-volume-provisioner", action="store_true", help="do not provision volumes nor bind claims")
    faults = serve.add_argument_group("fault injection")
    faults.add_argument("--fault-rate", type=float, default=0.0, help="fraction of API requests that fail (0-1)")
    faults.add_argument("--fault-seed", type=int, default=0, help="seed of the fault draws")
    kinds, verbs = ",".join(FAULT_KINDS), ",".join(FAULT_VERBS)
    faults.add_argument("--fault-kinds", default=kinds, help=f"comma-separated among {kinds}")
    faults.add_argument("--fault-verbs", default=verbs, help=f"comma-separated among {verbs}")
    serve.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    from topoplace.dev.kubeapi import KubeApiServer
    from topoplace.dev.kubeapi.faults import FaultPlan, parse_kinds

    try:
        plan = FaultPlan(
            rate=args.fault_rate,
            seed=args.fault_seed,
            kinds=parse_kinds(args.fault_kinds),
            verbs=parse_kinds(args.fault_verbs),
        )
    except ValueError as exc:  # "fault rate: ..." names the flag --fault-rate
        field, _, reason = str(exc).partition(": ")
        raise ConfigError("--" + field.replace(" ", "-"), reason) from None  # one line, exit 2
    server = KubeApiServer(
        args.host,
        args.port,
        bookmark_interval=args.bookmark_interval,
        faults=plan if plan.rate > 0 else None,
        claim_controller=not args.no_claim_controller,
        volume_provisioner=not args.no_volume_provisioner,
    )
    run_until_signalled(lambda stop: _serve_until_stopped(server, stop))
    return 0


async def _serve_until_stopped(server: KubeApiServer, stop: asyncio.Event) -> None:
    async with server:
        print(server.url, flush=True)  # the first line: scripts read the URL from it
        print(f"serving {SERVES}", file=sys.stderr)
        if server.faults is not None:
            plan = server.faults.plan
            print(
                f"injecting faults into {plan.rate:.1%} of requests ({','.join(plan.verbs)}): "
                f"{','.join(plan.kinds)}, seed {plan.seed}; counts at {server.url}/debug/faults",
                file=sys.stderr,
            )
        await stop.wait()
