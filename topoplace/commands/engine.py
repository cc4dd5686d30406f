"""`topoplace engine place|pick`: ask the engine directly, no services needed.

Exit codes (as every command): 0 a placement, 1 the engine answered that
nothing fits, 2 bad input. The engine and rich are imported by the command
that runs, not when the parser is built.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from topoplace.commands.exit_codes import BAD_INPUT, NO_PLACE, OK
from topoplace.commands.options import positive_int

if TYPE_CHECKING:
    from rich.console import Console

    from engine import Decision, Mode, NodeState, PlaceInput
    from schemas.topology import NodeTopology

# Engine modes, spelled out so that building the parser does not import the engine
# (tests/engine/test_cli.py checks they match engine.Mode).
MODES: tuple[str, ...] = ("default", "hami")
TOPOLOGY_POLICY = {"hami.io/gpu-scheduler-policy": "topology-aware"}


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("engine", help="run the placement engine on a file")
    sub = parser.add_subparsers(dest="engine_command", required=True)

    place_parser = sub.add_parser(
        "place",
        help="place one pod on a snapshot ({'snapshot': ..., 'request': ...}) or on a cluster of Kubernetes objects",
        description="Exit code 0: placed; 1: unschedulable (the decision still printed); 2: bad input.",
    )
    place_parser.add_argument(
        "--snapshot", help="JSON file: {snapshot, request} (PlaceInput); with --cluster: the nodes' devices and links"
    )
    place_parser.add_argument(
        "--cluster",
        action="append",
        default=[],
        help="kubectl get ... -A -o json|yaml output: Nodes, Pods (repeatable)",
    )
    place_parser.add_argument("--pods", action="append", default=[], help="with --cluster: the Pod object to place")
    place_parser.add_argument("--node", default=None, help="with --cluster: the one node to consider")
    place_parser.add_argument(
        "--feature-gates",
        default=None,
        help="with --cluster: Name=true|false,... (DRA gates; Kueue's TASBalancedPlacement; others noted)",
    )
    place_parser.add_argument("--json", action="store_true", help="print the answer as JSON (the default)")
    place_parser.add_argument("--mode", choices=MODES, default=MODES[0])
    place_parser.add_argument("--explain", action="store_true", help="print a table instead of JSON")
    place_parser.set_defaults(func=_place)

    pick_parser = sub.add_parser(
        "pick",
        help="which K devices of this box should my job get?",
        description="Exit code 0: devices chosen; 1: not enough free devices (the answer still printed); 2: bad input.",
    )
    pick_parser.add_argument("--topology", required=True, help="fixture name, JSON fixture or nvidia-smi topo -m print")
    pick_parser.add_argument("--count", type=int, required=True, help="devices wanted")
    pick_parser.add_argument("--free", default=None, help="free device indices, e.g. 0,2,5 (default: all)")
    pick_parser.add_argument("--mode", choices=MODES, default=MODES[0])
    add_model_options(pick_parser)
    pick_parser.set_defaults(func=_pick)


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """--model / --memory-mib: what a `nvidia-smi topo -m` print does not say (only memory requests need it)."""
    parser.add_argument(
        "--model", default=None, help="GPU model of a topo print (default: a placeholder; whole-GPU picks need none)"
    )
    parser.add_argument("--memory-mib", type=positive_int, default=None, help="device memory of a topo print, in MiB")


def _fail(message: str) -> int:
    print(f"topoplace engine: {message}", file=sys.stderr)
    return BAD_INPUT


def read_place_input(path: str) -> PlaceInput:
    """Raises ValueError naming the file, the field and the reason."""
    import msgspec

    from engine import PlaceInput, RequestError
    from engine.cluster.network import decode_hypernodes
    from engine.core.validate import validate_gang_input, validate_snapshot
    from schemas.gangs import PodGroup
    from topoplace.strict_input import strict_convert

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror}") from None
    try:
        raw = msgspec.json.decode(data)
        # HyperNodes come in either form (kubectl's objects, or the topic's flattened events).
        snapshot = raw.get("snapshot") if isinstance(raw, dict) else None
        hypernodes = decode_hypernodes(snapshot.pop("hypernodes", [])) if isinstance(snapshot, dict) else ()
        given = strict_convert(raw, PlaceInput, lenient=(PodGroup,))
        given = msgspec.structs.replace(given, snapshot=msgspec.structs.replace(given.snapshot, hypernodes=hypernodes))
    except (ValueError, msgspec.DecodeError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    if (given.request is None) == (given.gang is None):
        raise ValueError(f"{path}: give either `request` (one pod) or `gang`, not both or neither")
    try:
        validate_snapshot(given.snapshot)
        if given.gang is not None:
            validate_gang_input(given.gang)
    except RequestError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return given


def _place(args: argparse.Namespace) -> int:
    import msgspec

    from engine import Mode, RequestError, place

    if args.cluster:
        if args.explain:
            return _fail("--explain: not with --cluster (its answer is JSON)")
        from topoplace.commands.engine_cluster import place_on_cluster

        return place_on_cluster(args)
    if args.snapshot is None:
        return _fail("give --snapshot FILE, or --cluster FILE ... --pods FILE")
    if args.pods or args.node is not None or args.feature_gates is not None:
        return _fail("--pods, --node and --feature-gates go with --cluster")
    try:
        given = read_place_input(args.snapshot)
        if given.gang is not None:
            return place_gang_answer(given, Mode(args.mode), args.explain)
        assert given.request is not None
        decision = place(given.snapshot, given.request, Mode(args.mode), explain=True)
    except (ValueError, RequestError) as exc:
        return _fail(str(exc))
    if args.explain:
        from rich.console import Console

        console = Console()
        print_explanation(decision, console)
        if decision.node is not None:
            from topoplace.commands.enforcement_text import configured_default, enforcement_line

            node = next(n for n in given.snapshot.nodes if n.name == decision.node)
            try:
                line = enforcement_line(node.labels, node.annotations, configured_default())
            except ValueError as exc:
                return _fail(str(exc))
            console.print(f"{decision.node} {line}", markup=False)
    else:
        print(msgspec.json.format(msgspec.json.encode(decision).decode(), indent=2))
    return OK if decision.node is not None else NO_PLACE


def place_gang_answer(given: PlaceInput, mode: Mode, explain: bool) -> int:
    """A gang's decision: {gang, placed, hypernode, tier, pods: [{name, node, devices, score}], reason}."""
    import msgspec

    from engine import index_of, place_gang
    from engine.cluster.network import build_tree
    from engine.decide.gang.input import gang_request
    from engine.node.vendors import registry

    assert given.gang is not None
    snapshot = given.snapshot
    tree = build_tree(
        snapshot.hypernodes, {n.name: n.labels for n in snapshot.nodes}, topology_levels=snapshot.topology_levels
    )
    gang = gang_request(given.gang)
    decision = place_gang(registry, index_of(snapshot), tree.tree, gang, mode, workload=snapshot.workload)
    # The engine's GangDecision as it is (schemas/json/engine-gang-decision.schema.json), and what the
    # network tree could not honour.
    answer: dict[str, Any] = msgspec.to_builtins(decision)
    answer["problems"] = [f"{p.object}: {p.field}: {p.reason}" for p in tree.problems]
    if explain:
        from rich.console import Console

        _print_gang(answer, Console())
    else:
        print(msgspec.json.format(msgspec.json.encode(answer).decode(), indent=2))
    return OK if decision.placed else NO_PLACE


def _print_gang(answer: dict[str, Any], console: Console) -> None:
    from rich.table import Table

    if answer["placed"]:
        console.print(f"[bold green]gang {answer['gang']}[/] in {answer['hypernode']} (tier {answer['tier']})")
    else:
        console.print(f"[bold red]gang {answer['gang']} unschedulable[/]: {answer['reason']}")
    for refused in answer["refused_tiers"]:  # why it is not lower
        name = f" ({refused['tier_name']})" if refused["tier_name"] else ""
        console.print(f"[yellow]not tier {refused['tier']}{name}[/]: {refused['reason']}")
    table = Table()
    for column in ("pod", "node", "devices", "score"):
        table.add_column(column)
    for pod in answer["pods"]:
        devices = ",".join(str(d["index"]) for d in pod["devices"])
        note = " (running)" if pod.get("running") else ""
        table.add_row(pod["name"], f"{pod['node'] or ''}{note}", devices, f"{pod['score']:g}")
    console.print(table)
    for problem in answer["problems"]:
        console.print(f"[yellow]network tree[/]: {problem}")


def print_explanation(decision: Decision, console: Console) -> None:
    from rich.table import Table

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


def load_box(source: str, model: str | None, memory_mib: int | None, node: str = "node-0") -> NodeTopology:
    """The topology of `source`; a topo print with no model gets a placeholder one.

    Raises ValueError naming the source, the line and the reason.
    """
    from services.collector.node.topology_files import load_topology

    return load_topology(source, node=node, model=model, memory_mib=memory_mib, require_model=False)


def pick_node(source: str, topology: NodeTopology, free: tuple[int, ...]) -> NodeState:
    """The box as a node on which every device not in `free` is held by another pod."""
    from engine import Allocation, NodeState
    from services.collector.node.topology_files import fixture_names, fixture_node_annotations, fixture_node_labels

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
    if args.count < 1:
        return _fail("--count: must be at least 1")
    try:
        topology = load_box(args.topology, args.model, args.memory_mib)
        free = parse_free(args.free, topology)
    except ValueError as exc:
        return _fail(str(exc))
    if not topology.devices:
        return _fail(f"{args.topology}: no devices")

    import msgspec

    from engine import Mode, PodRequest, RequestError, choose_devices
    from schemas.vendors import descriptor

    # The box's vendor's whole devices (schemas/vendors.py).
    count_resource = descriptor(topology.devices[0].vendor).whole
    request = PodRequest(
        uid="pick", name="pick", requests={count_resource: str(args.count)}, annotations=TOPOLOGY_POLICY
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
    return OK if not choice.reason else NO_PLACE
