"""Checks a snapshot from outside (a file, a user) before the engine trusts it.

The engine's types say what each field is; these checks say how the fields
must agree with each other: device indices unique per node, links and
allocations naming devices the node has, no negative amounts. Every error
names the field as a path into the snapshot, e.g. `snapshot.nodes[1].links[3].dst`.
"""

from __future__ import annotations

from engine.core.errors import RequestError
from engine.core.model import GangInput, NodeState, Snapshot


def validate_snapshot(snapshot: Snapshot) -> None:
    """Raises RequestError(field, reason) on the first inconsistency found."""
    names: dict[str, int] = {}
    for position, node in enumerate(snapshot.nodes):
        where = f"snapshot.nodes[{position}]"
        if not node.name:
            raise RequestError(f"{where}.name", "must not be empty")
        if node.name in names:
            raise RequestError(f"{where}.name", f"{node.name!r} is also nodes[{names[node.name]}]")
        names[node.name] = position
        validate_node(node, where)


def validate_node(node: NodeState, where: str) -> None:
    indices: dict[int, int] = {}
    for position, device in enumerate(node.devices):
        field = f"{where}.devices[{position}]"
        if device.index < 0:
            raise RequestError(f"{field}.index", f"must not be negative, got {device.index}")
        if device.index in indices:
            raise RequestError(
                f"{field}.index", f"device {device.index} appears twice (also devices[{indices[device.index]}])"
            )
        if device.memory_mib < 0:
            raise RequestError(f"{field}.memory_mib", f"must not be negative, got {device.memory_mib}")
        if device.cores < 0:
            raise RequestError(f"{field}.cores", f"must not be negative, got {device.cores}")
        indices[device.index] = position
    for position, link in enumerate(node.links):
        field = f"{where}.links[{position}]"
        for end, index in (("src", link.src), ("dst", link.dst)):
            if index not in indices:
                raise RequestError(f"{field}.{end}", f"no device {index} on node {node.name!r}")
        if link.src == link.dst:
            raise RequestError(field, f"a device cannot link to itself ({link.src})")
        if link.nvlinks < 0:
            raise RequestError(f"{field}.nvlinks", f"must not be negative, got {link.nvlinks}")
    for position, allocation in enumerate(node.allocations):
        field = f"{where}.allocations[{position}]"
        if allocation.index not in indices:
            raise RequestError(f"{field}.index", f"no device {allocation.index} on node {node.name!r}")
        if allocation.memory_mib < 0:
            raise RequestError(f"{field}.memory_mib", f"must not be negative, got {allocation.memory_mib}")
        if allocation.cores < 0:
            raise RequestError(f"{field}.cores", f"must not be negative, got {allocation.cores}")


def validate_gang_input(gang: GangInput) -> None:
    """A gang from a file: each member named once, a minimum that is not negative."""
    uids: dict[str, int] = {}
    for position, pod in enumerate(gang.pods):
        where = f"gang.pods[{position}].uid"
        if not pod.uid:
            raise RequestError(where, "must not be empty")
        if pod.uid in uids:
            raise RequestError(where, f"{pod.uid!r} is also gang.pods[{uids[pod.uid]}]")
        uids[pod.uid] = position
    if gang.podgroup is not None and gang.podgroup.spec.min_member < 0:
        raise RequestError("gang.podgroup.spec.minMember", f"must not be negative, got {gang.podgroup.spec.min_member}")
