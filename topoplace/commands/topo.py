"""`topoplace topo show`: a node's device matrix the way `nvidia-smi topo -m` prints it, with scores.
`topoplace topo tree`: a snapshot's network tree with free / total devices per hypernode.

The matrix is plain text that fits the terminal (80 columns when not a
terminal): a node too wide for one block is printed in blocks of columns,
the way a long row of numbers is wrapped, each block under its own header.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import textwrap
from typing import TYPE_CHECKING, Any

from topoplace.commands.engine import add_model_options
from topoplace.commands.exit_codes import BAD_INPUT, OK

if TYPE_CHECKING:
    from engine import NodeState
    from schemas.topology import Device

DEFAULT_WIDTH = 80
SCORES = (
    "NV# 100 per NVLink + its PCIe path",
    "(unprinted: NODE or SYS by NUMA)",
    "SAME_BOARD 60",
    "PIX 50",
    "PXB 40",
    "PHB 30",
    "NODE 20",
    "SYS 10",
)
SCORES_LEGEND = ("scores:", *SCORES)
SCORES_LEGEND_PER_LABEL = ("pair score of each label:", *SCORES)


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("topo", help="show device topologies")
    sub = parser.add_subparsers(dest="topo_command", required=True)
    show = sub.add_parser("show", help="the device matrix of one node (X, NV#, PIX, PXB, PHB, NODE, SYS) with scores")
    source = show.add_mutually_exclusive_group(required=True)
    source.add_argument("--snapshot", help="a snapshot JSON ({snapshot, request}) ...")
    source.add_argument("--topology", help="... or a fixture name, JSON fixture or nvidia-smi topo -m print")
    show.add_argument("--node", help="node name (required with --snapshot)")
    show.add_argument("--width", type=int, default=None, help="columns to fit in (default: the terminal's, else 80)")
    add_model_options(show)
    show.set_defaults(func=_show)
    tree = sub.add_parser("tree", help="the network tree of a snapshot: hypernodes, tiers, free/total devices")
    tree.add_argument("--snapshot", required=True, help="a snapshot JSON ({snapshot: {...}} or the snapshot itself)")
    tree.add_argument("--hypernodes-only", action="store_true", help="leave the nodes out of the drawing")
    tree.set_defaults(func=_tree)


def _load_node(args: argparse.Namespace) -> NodeState:
    from engine import NodeState

    if args.snapshot:
        from topoplace.commands.engine import read_place_input

        if not args.node:
            raise ValueError("--node: required with --snapshot")
        nodes = {n.name: n for n in read_place_input(args.snapshot).snapshot.nodes}
        if args.node not in nodes:
            raise ValueError(f"--node: no node {args.node!r} in {args.snapshot} (nodes: {', '.join(sorted(nodes))})")
        return nodes[args.node]
    from topoplace.commands.engine import load_box

    topology = load_box(args.topology, args.model, args.memory_mib, node=args.node or "node-0")
    return NodeState(
        name=topology.node, machine_type=topology.machine_type, devices=topology.devices, links=topology.links
    )


def cell(a: Device, b: Device, node: NodeState, *, with_score: bool = True) -> str:
    """`nvidia-smi topo -m` label of a pair plus its score, e.g. "NV18 1800" or "SYS 10"."""
    from engine.node.vendors.nvidia.links import pair_score
    from schemas.topology import Vendor

    if a.index == b.index:
        return "X"
    links = {(link.src, link.dst): link for link in node.links}
    pair = pair_score(a, b, links)
    if pair.asymmetric:
        return "ASYM 0" if with_score else "ASYM"
    if pair.nvlinks:
        label = f"NV{pair.nvlinks}"
    elif pair.pcie is not None:
        label = pair.pcie.value
    else:
        return "- 0" if with_score else "-"
    if a.vendor is not Vendor.NVIDIA or not with_score:
        return label
    return f"{label} {pair.score}"


def device_name(device: Device) -> str:
    from schemas.topology import Vendor

    return f"GPU{device.index}" if device.vendor is Vendor.NVIDIA else f"D{device.index}"


def render(node: NodeState, width: int = DEFAULT_WIDTH) -> list[str]:
    """The matrix as lines no longer than `width` (when even one device column fits)."""
    devices = sorted(node.devices, key=lambda d: d.index)
    names = [device_name(d) for d in devices]
    numa = ["N/A" if d.numa_node is None else str(d.numa_node) for d in devices]
    label_width = max([len(n) for n in names] + [len("NUMA")])
    numa_width = max([len(v) for v in numa] + [len("NUMA")])
    # Each cell with its score when the whole matrix fits so; else labels only (the legend
    # gives each label's score), in blocks of columns when even that is too wide.
    room = width - label_width - numa_width - 2
    cells = [[cell(a, b, node) for b in devices] for a in devices]
    column_width = _column_width(names, cells)
    scored = room // column_width >= len(devices)
    if not scored:
        cells = [[cell(a, b, node, with_score=False) for b in devices] for a in devices]
        column_width = _column_width(names, cells)
    fits = max(1, room // column_width)
    blocks = -(-len(devices) // fits)
    per_block = -(-len(devices) // blocks)  # blocks of even size: 8 + 8, not 11 + 5

    lines = textwrap.wrap(f"{node.name} ({node.machine_type}): link and pair score", width)
    for start in range(0, len(devices), per_block):
        block = range(start, min(start + per_block, len(devices)))
        if start:
            lines.append("")
        header = " " * label_width + " " + "NUMA".rjust(numa_width) + " "
        lines.append((header + "".join(names[j].center(column_width) for j in block)).rstrip())
        for i, name in enumerate(names):
            row = name.ljust(label_width) + " " + numa[i].rjust(numa_width) + " "
            lines.append((row + "".join(cells[i][j].center(column_width) for j in block)).rstrip())
    legend = SCORES_LEGEND if scored else SCORES_LEGEND_PER_LABEL
    lines.extend(_pack(legend, width))
    return lines


def _pack(items: tuple[str, ...], width: int) -> list[str]:
    """A title and its items on lines of at most `width`, never splitting an item ("SYS 10" stays whole)."""
    title, *rest = items
    lines = [title]
    for position, item in enumerate(rest):
        joined = f"{lines[-1]} {item}" if lines[-1] == title else f"{lines[-1]}, {item}"
        comma = 1 if position < len(rest) - 1 else 0  # the comma a later item may add to this line
        if len(joined) + comma <= width:
            lines[-1] = joined
        else:
            if lines[-1] != title:
                lines[-1] += ","
            lines.append(f"  {item}")
    return lines


def _column_width(names: list[str], cells: list[list[str]]) -> int:
    widest = max([len(n) for n in names] + [len(c) for row in cells for c in row])
    return widest + 1  # at least one blank between cells


def _show(args: argparse.Namespace) -> int:
    try:
        node = _load_node(args)
    except ValueError as exc:
        print(f"topoplace topo show: {exc}", file=sys.stderr)
        return BAD_INPUT
    if args.width is not None and args.width < 20:
        print(f"topoplace topo show: --width: at least 20 columns, got {args.width}", file=sys.stderr)
        return BAD_INPUT
    width = args.width or (shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns if sys.stdout.isatty() else 0)
    from topoplace.commands.enforcement_text import configured_default, enforcement_line

    try:
        default = configured_default()
    except ValueError as exc:
        print(f"topoplace topo show: {exc}", file=sys.stderr)
        return BAD_INPUT
    for line in render(node, width or DEFAULT_WIDTH):
        print(line)
    for line in textwrap.wrap(enforcement_line(node.labels, node.annotations, default), width or DEFAULT_WIDTH):
        print(line)
    return OK


def _tree(args: argparse.Namespace) -> int:
    from topoplace.commands.topo_tree import TreeInputError, render_snapshot_tree

    try:
        text = render_snapshot_tree(args.snapshot, show_nodes=not args.hypernodes_only)
    except TreeInputError as exc:
        print(f"topoplace topo tree: {exc}", file=sys.stderr)
        return BAD_INPUT
    sys.stdout.write(text)
    return OK
