"""A fleet of simulated nodes in one process: one node agent loop per node, one producer.

For demos and clusters of simulated nodes (KWOK), where a process per node
would cost more than the nodes themselves. Each member publishes exactly what
`topoplace collector node` would for that node.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec

from services.collector.node.agent import make_reader, publish_nodes
from topoplace.config import Settings


class FleetMember(msgspec.Struct, frozen=True, kw_only=True):
    node: str
    source: str  # a fixture name or file, as for `collector node --source`


class Fleet(msgspec.Struct, frozen=True, kw_only=True):
    members: tuple[FleetMember, ...]


class FleetError(ValueError):
    pass


def load_fleet(path: str | Path) -> Fleet:
    """A fleet file: {"members": [{"node": ..., "source": ...}, ...]}; node names must be unique."""
    try:
        fleet = msgspec.json.decode(Path(path).read_bytes(), type=Fleet)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise FleetError(f"fleet file {path}: {exc}") from exc
    seen: set[str] = set()
    for i, member in enumerate(fleet.members):
        if member.node in seen:
            raise FleetError(f"fleet file {path}: members[{i}].node: {member.node!r} appears twice")
        seen.add(member.node)
    return fleet


async def run_fleet(
    settings: Settings, fleet: Fleet, *, interval_seconds: float = 10.0, stop: asyncio.Event | None = None
) -> None:
    """Publish every member's topology and usage until `stop` is set."""
    readers = {m.node: make_reader(m.source, node=m.node) for m in fleet.members}
    await publish_nodes(settings, readers, interval_seconds=interval_seconds, stop=stop)
