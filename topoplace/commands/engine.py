"""`topoplace engine place|pick`: ask the engine directly, no services needed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table

from schemas.topology import NodeTopology, Vendor
from services.placer.engine import (
    Allocation,
    Decision,
    Mode,
    NodeState,
    PlaceInput,
    PodRequest,
    RequestError,
    choose_devices,
    place,
)

# The count resource `engine pick` asks for, per vendor of the box.
COUNT_RESOURCE: dict[Vendor, str] = {
    Vendor.NVIDIA: "nvidia.com/gpu",
    Vendor.METAX: "metax-tech.com/gpu",
    Vendor.NEURON: "aws.amazon.com/neuron",
}
TOPOLOGY_POLICY = {"hami.io/gpu-scheduler-policy": "topology-aware"}


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("engine", help="run the placement engine on a file")
    sub = parser.add_subparsers(dest="engine_command", required=True)

    place_parser = sub.add_parser(
        "place",
        help="place one pod on a snapshot: {'snapshot': ..., 'request': ...} -> decision JSON",
    )
    place_parser.add_argument("--snapshot", required=True, help="JSON file: {snapshot, request} (PlaceInput)")
    place_parser.add_argument("--mode", choices=[m.value for m in Mode], default=Mode.DEFAULT.value)
    place_parser.add_argument("--explain", action="store_true", help="print a table instead of JSON")
    place_parser.set_defaults(func=_place)

    pick_parser = sub.add_parser("pick", help="which K devices of this box should my job get?")
    pick_parser.add_argument("--topology", required=True, help="fixture name, JSON fixture or nvidia-smi topo -m print")
    pick_parser.add_argument("--count", type=int, required=True, help="devices wanted")
    pick_parser.add_argument("--free", default=None, help="free device indices, e.g. 0,2,5 (default: all)")
    pick_parser.add_argument("--mode", choices=[m.value for m in Mode], default=Mode.DEFAULT.value)
    pick_parser.set_defaults(func=_pick)


def _fail(message: str) -> int:
    print(f"topoplace engine: {message}", file=sys.stderr)
    return 2


def read_place_input(path: str) -> PlaceInput:
    """Raises ValueError naming the file, the field and the reason."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror}") from None
    try:
        return msgspec.json.decode(data, type=PlaceInput)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ValueError(f"{path}: {exc}") from None


def _place(args: argparse.Namespace) -> int:
    try:
        given = read_place_input(args.snapshot)
        decision = place(given.snapshot, given.request, Mode(args.mode), explain=True)
    except (ValueError, RequestError) as exc:
        return _fail(str(exc))
    if args.explain:
        print_explanation(decision, Console())
    else:
        print(msgspec.json.format(msgspec.json.encode(decision).decode(), indent=2))
    return 0


def print_explanation(decision: Decision, console: Console) -> None:
    if decision.node is None:
        console.print(f"[bold red]unschedulable[/]: {decision.reason}")
    else:
        devices = ", ".join(str(d.index) for d in decision.devices)
        console.print(f"[bold green]{decision.node}[/] devices [{devices}] score {decision.score:g}")
        parts = ", ".join(f"{k}={v:g}" for k, v in decision.score_parts.items())
        console.print(f"score parts: {parts}")
    table = Table(title="other nodes, best first")
    for column in ("node", "fits", "score", "devices", "why not"):
        table.add_column(column)
    for verdict in decision.alternatives:
        table.add_row(
            verdict.node,
            "yes" if verdict.fits else "no",
            f"{verdict.score:g}" if verdict.fits else "",
            ",".join(str(i) for i in verdict.devices),
            verdict.reason,
        )
    console.print(table)
    for warning in decision.warnings:
        console.print(f"[yellow]warning[/]: {warning}")


def parse_free(text: str | None, topology: NodeTopology) -> tuple[int, ...]:
    indices = tuple(sorted(d.index for d in topology.devices))
    if text is None:
        return indices
    try:
        free = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"--free: expected comma-separated device indices, got {text!r}") from None
    unknown = [i for i in free if i not in indices]
    if unknown:
        raise ValueError(f"--free: no device {unknown[0]} on this box (devices {list(indices)})")
    return free


def pick_node(source: str, topology: NodeTopology, free: tuple[int, ...]) -> NodeState:
    """The box as a node on which every device not in `free` is held by another pod."""
    from services.collector.topology_files import fixture_names, fixture_node_annotations, fixture_node_labels

    is_fixture = source in fixture_names()
    return NodeState(
        name=topology.node,
        machine_type=topology.machine_type,
        devices=topology.devices,
        links=topology.links,
        labels=fixture_node_labels(source) if is_fixture else {},
        annotations=fixture_node_annotations(source, node=topology.node) if is_fixture else {},
        allocations=tuple(Allocation(pod_uid="busy", index=d.index) for d in topology.devices if d.index not in free),
    )


def _pick(args: argparse.Namespace) -> int:
    from services.collector.topology_files import load_topology

    try:
        topology = load_topology(args.topology)
        free = parse_free(args.free, topology)
    except ValueError as exc:
        return _fail(str(exc))
    if not topology.devices:
        return _fail(f"{args.topology}: no devices")
    if args.count < 1:
        return _fail("--count: must be at least 1")
    vendor = topology.devices[0].vendor
    request = PodRequest(
        uid="pick", name="pick", requests={COUNT_RESOURCE[vendor]: str(args.count)}, annotations=TOPOLOGY_POLICY
    )
    try:
        choice = choose_devices(pick_node(args.topology, topology, free), request, Mode(args.mode))
    except RequestError as exc:
        return _fail(str(exc))
    out: dict[str, object] = {
        "devices": list(choice.devices),
        "score": choice.score,
        "alternatives": [msgspec.to_builtins(a) for a in choice.alternatives],
    }
    if choice.reason:
        out["reason"] = choice.reason
    if choice.warnings:
        out["warnings"] = list(choice.warnings)
    print(msgspec.json.format(msgspec.json.encode(out).decode(), indent=2))
    return 0 if not choice.reason else 1
