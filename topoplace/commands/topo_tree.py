"""What `topoplace topo tree` reads from a snapshot file, and the drawing it prints.

Only the fields the tree needs are decoded here (node names, labels,
devices, allocations; hypernodes in either form; optional topology levels),
so the command does not depend on the engine's snapshot model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from engine.cluster.network import build_tree, decode_hypernodes
from engine.cluster.network.render import render_tree


class TreeInputError(ValueError):
    """A snapshot file the command cannot read; the message names the file and the field."""


class _Device(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    healthy: bool = True


class _Allocation(msgspec.Struct, frozen=True, kw_only=True):
    index: int


class _Node(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    labels: dict[str, str] = {}
    devices: tuple[_Device, ...] = ()
    allocations: tuple[_Allocation, ...] = ()

    def free_devices(self) -> int:
        """Healthy devices that no allocation holds (a share holds its device too)."""
        held = {a.index for a in self.allocations}
        return sum(1 for d in self.devices if d.healthy and d.index not in held)


class _Snapshot(msgspec.Struct, frozen=True, kw_only=True):
    nodes: tuple[_Node, ...]
    hypernodes: list[Any] = []
    topology_levels: tuple[str, ...] = ()


def read_snapshot(path: str) -> _Snapshot:
    try:
        raw = msgspec.json.decode(Path(path).read_bytes())
    except OSError as exc:
        raise TreeInputError(f"{path}: {exc.strerror or exc}") from exc
    except msgspec.DecodeError as exc:
        raise TreeInputError(f"{path}: not JSON: {exc}") from exc
    if isinstance(raw, dict) and isinstance(raw.get("snapshot"), dict):
        raw = raw["snapshot"]
    try:
        return msgspec.convert(raw, _Snapshot)
    except msgspec.ValidationError as exc:
        raise TreeInputError(f"{path}: {exc}") from exc


def render_snapshot_tree(path: str, *, show_nodes: bool = True) -> str:
    snapshot = read_snapshot(path)
    try:
        hypernodes = decode_hypernodes(snapshot.hypernodes)
    except msgspec.ValidationError as exc:
        raise TreeInputError(f"{path}: {exc}") from exc
    labels = {node.name: node.labels for node in snapshot.nodes}
    built = build_tree(hypernodes, labels, topology_levels=snapshot.topology_levels)
    free = {node.name: node.free_devices() for node in snapshot.nodes}
    total = {node.name: len(node.devices) for node in snapshot.nodes}
    return render_tree(built.tree, free, total, show_nodes=show_nodes, problems=built.problems)
