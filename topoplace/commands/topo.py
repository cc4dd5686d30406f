"""`topoplace topo show`: a node's device matrix the way `nvidia-smi topo -m` prints it, with scores.
`topoplace topo tree`: a snapshot's network tree with free / total devices per hypernode.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from schemas.topology import Device, Vendor
from services.placer.engine import NodeState
from services.placer.engine.vendors.nvidia_links import pair_score


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("topo", help="show device topologies")
    sub = parser.add_subparsers(dest="topo_command", required=True)
    show = sub.add_parser("show", help="the device matrix of one node (X, NV#, PIX, PXB, PHB, NODE, SYS) with scores")
    source = show.add_mutually_exclusive_group(required=True)
    source.add_argument("--snapshot", help="a snapshot JSON ({snapshot, request}) ...")
    source.add_argument("--topology", help="... or a fixture name, JSON fixture or nvidia-smi topo -m print")
    show.add_argument("--node", help="node name (required with --snapshot)")
    show.set_defaults(func=_show)
    tree = sub.add_parser("tree", help="the network tree of a snapshot: hypernodes, tiers, free/total devices")
    tree.add_argument("--snapshot", required=True, help="a snapshot JSON ({snapshot: {...}} or the snapshot itself)")
    tree.add_argument("--hypernodes-only", action="store_true", help="leave the nodes out of the drawing")
    tree.set_defaults(func=_tree)


def _load_node(args: argparse.Namespace) -> NodeState:
    if args.snapshot:
        from topoplace.commands.engine import read_place_input

        if not args.node:
            raise ValueError("--node: required with --snapshot")
        nodes = {n.name: n for n in read_place_input(args.snapshot).snapshot.nodes}
        if args.node not in nodes:
            raise ValueError(f"--node: no node {args.node!r} in {args.snapshot} (nodes: {', '.join(sorted(nodes))})")
        return nodes[args.node]
    from services.collector.topology_files import load_topology

    topology = load_topology(args.topology, node=args.node or "node-0")
    return NodeState(
        name=topology.node, machine_type=topology.machine_type, devices=topology.devices, links=topology.links
    )


def cell(a: Device, b: Device, node: NodeState) -> str:
    """`nvidia-smi topo -m` label of a pair plus its score, e.g. "NV18 1800" or "SYS 10"."""
    if a.index == b.index:
        return "X"
    links = {(link.src, link.dst): link for link in node.links}
    pair = pair_score(a, b, links)
    if pair.asymmetric:
        return "ASYM 0"
    if pair.nvlinks:
        label = f"NV{pair.nvlinks}"
    elif pair.pcie is not None:
        label = pair.pcie.value
    else:
        return "- 0"
    if a.vendor is not Vendor.NVIDIA:
        return label
    return f"{label} {pair.score}"


def render(node: NodeState) -> Table:
    devices = sorted(node.devices, key=lambda d: d.index)
    table = Table(title=f"{node.name} ({node.machine_type}): link and pair score")
    table.add_column("")
    for d in devices:
        table.add_column(f"GPU{d.index}" if d.vendor is Vendor.NVIDIA else f"D{d.index}", justify="center")
    table.add_column("NUMA")
    for a in devices:
        numa = str(a.numa_node) if a.numa_node is not None else "N/A"
        name = f"GPU{a.index}" if a.vendor is Vendor.NVIDIA else f"D{a.index}"
        table.add_row(name, *(cell(a, b, node) for b in devices), numa)
    return table


def _show(args: argparse.Namespace) -> int:
    try:
        node = _load_node(args)
    except ValueError as exc:
        print(f"topoplace topo show: {exc}", file=sys.stderr)
        return 2
    console = Console()
    console.print(render(node))
    console.print("scores: NV# 100 per NVLink; SAME_BOARD 60, PIX 50, PXB 40, PHB 30, NODE 20, SYS 10")
    return 0


def _tree(args: argparse.Namespace) -> int:
    from topoplace.commands.topo_tree import TreeInputError, render_snapshot_tree

    try:
        text = render_snapshot_tree(args.snapshot, show_nodes=not args.hypernodes_only)
    except TreeInputError as exc:
        print(f"topoplace topo tree: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0
