"""Server-side printing: the `meta.k8s.io/v1` Table that kubectl's `get` asks for (`Accept:
application/json;as=Table;v=v1;g=meta.k8s.io`), with the columns the real server prints for each kind
(kube's `printers.go` for built-in kinds, `additionalPrinterColumns` for the Volcano CRDs) and ages as
kube's `HumanDuration` writes them. Columns with priority 1 are the ones `-o wide` adds."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import msgspec

from topoplace.dev.kubeapi import resources
from topoplace.dev.kubeapi.errors import bad_request
from topoplace.dev.kubeapi.resources import ResourceType

Object = dict[str, Any]
Cell = str | int | None


class Column(msgspec.Struct, frozen=True):
    name: str
    cell: Callable[[Object, float], Cell]  # (object, now) -> the printed cell
    type: str = "string"
    priority: int = 0
    format: str = ""

    def definition(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": "",
            "priority": self.priority,
        }


def human_duration(seconds: float) -> str:
    """kube's `duration.HumanDuration`: 90s, 5m30s, 3h20m, 2d4h, 1y20d."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes, hours = s // 60, s // 3600
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def _since(stamp: Any, now: float) -> str:
    """A timestamp's age; `<unknown>` without one, as the real printers write it."""
    if not isinstance(stamp, str) or not stamp:
        return "<unknown>"
    try:
        at = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return "<unknown>"
    return human_duration(now - at)


def _get(obj: Object, path: str) -> Any:
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _text(obj: Object, path: str, missing: str = "<none>") -> str:
    value = _get(obj, path)
    return missing if value in (None, "") else str(value)


def _name(obj: Object, now: float) -> Cell:
    return str(obj["metadata"]["name"])


def _age(obj: Object, now: float) -> Cell:
    return _since(obj["metadata"].get("creationTimestamp"), now)


NAME = Column("Name", _name, format="name")
AGE = Column("Age", _age)


def _pod_status(pod: Object) -> str:
    """printPod's reason: Terminating, a container's waiting / terminated reason, SchedulingGated, else the phase."""
    status = pod.get("status") or {}
    if pod["metadata"].get("deletionTimestamp"):
        return "Terminating"
    reason = status.get("reason") or status.get("phase") or "Unknown"
    if reason == "Pending" and (pod.get("spec") or {}).get("schedulingGates"):
        return "SchedulingGated"
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        for key in ("waiting", "terminated"):
            if (state.get(key) or {}).get("reason"):
                reason = state[key]["reason"]
    return str(reason)


def _pod_ready(pod: Object, now: float) -> Cell:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    total = len((pod.get("spec") or {}).get("containers") or [])
    return f"{sum(1 for c in statuses if c.get('ready'))}/{total}"


def _restarts(pod: Object, now: float) -> Cell:
    return str(sum(int(c.get("restartCount") or 0) for c in (pod.get("status") or {}).get("containerStatuses") or []))


def _readiness_gates(pod: Object, now: float) -> Cell:
    gates = (pod.get("spec") or {}).get("readinessGates") or []
    if not gates:
        return "<none>"
    true = {c.get("type") for c in (pod.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}
    return f"{sum(1 for g in gates if g.get('conditionType') in true)}/{len(gates)}"


def _field(path: str, missing: str = "<none>") -> Callable[[Object, float], Cell]:
    return lambda obj, now: _text(obj, path, missing)


_POD = (
    NAME,
    Column("Ready", _pod_ready),
    Column("Status", lambda p, now: _pod_status(p)),
    Column("Restarts", _restarts),
    AGE,
    Column("IP", _field("status.podIP"), priority=1),
    Column("Node", _field("spec.nodeName"), priority=1),
    Column("Nominated Node", _field("status.nominatedNodeName"), priority=1),
    Column("Readiness Gates", _readiness_gates, priority=1),
)


def _node_status(node: Object, now: float) -> Cell:
    ready = [c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
    states = ["Ready" if ready and ready[0].get("status") == "True" else ("NotReady" if ready else "Unknown")]
    if (node.get("spec") or {}).get("unschedulable"):
        states.append("SchedulingDisabled")
    return ",".join(states)


def _node_roles(node: Object, now: float) -> Cell:
    labels = node["metadata"].get("labels") or {}
    roles = sorted(
        {k.removeprefix("node-role.kubernetes.io/") for k in labels if k.startswith("node-role.kubernetes.io/")}
        | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set())
    )
    return ",".join(r for r in roles if r) or "<none>"


def _address(kind: str) -> Callable[[Object, float], Cell]:
    def cell(node: Object, now: float) -> Cell:
        found = [a.get("address") for a in (node.get("status") or {}).get("addresses") or [] if a.get("type") == kind]
        return str(found[0]) if found else "<none>"

    return cell


_NODE = (
    NAME,
    Column("Status", _node_status),
    Column("Roles", _node_roles),
    AGE,
    Column("Version", _field("status.nodeInfo.kubeletVersion", "")),
    Column("Internal-IP", _address("InternalIP"), priority=1),
    Column("External-IP", _address("ExternalIP"), priority=1),
    Column("OS-Image", _field("status.nodeInfo.osImage", "<unknown>"), priority=1),
    Column("Kernel-Version", _field("status.nodeInfo.kernelVersion", "<unknown>"), priority=1),
    Column("Container-Runtime", _field("status.nodeInfo.containerRuntimeVersion", "<unknown>"), priority=1),
)


def _event_last_seen(ev: Object, now: float) -> Cell:
    stamp = ev.get("lastTimestamp") or ev.get("eventTime") or ev.get("deprecatedLastTimestamp")
    series = (ev.get("series") or {}).get("lastObservedTime")
    return _since(series or stamp or ev["metadata"].get("creationTimestamp"), now)


def _event_object(path: str) -> Callable[[Object, float], Cell]:
    def cell(ev: Object, now: float) -> Cell:
        ref = ev.get(path) or {}
        return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}"

    return cell


def _event_columns(regarding: str, note: str, source: str) -> tuple[Column, ...]:
    return (
        Column("Last Seen", _event_last_seen),
        Column("Type", _field("type", "")),
        Column("Reason", _field("reason", "")),
        Column("Object", _event_object(regarding)),
        Column("Subobject", _field(f"{regarding}.fieldPath", ""), priority=1),
        Column("Source", _field(source, ""), priority=1),
        Column("Message", _field(note, "")),
        Column("First Seen", lambda ev, now: _since(ev.get("firstTimestamp") or ev.get("eventTime"), now), priority=1),
        Column("Count", lambda ev, now: int(ev.get("count") or ev.get("deprecatedCount") or 1), priority=1),
        Column("Name", _name, priority=1),
    )


def _claim_state(claim: Object, now: float) -> Cell:
    """printers.go's resourceClaimState."""
    status, deleted = claim.get("status") or {}, bool(claim["metadata"].get("deletionTimestamp"))
    states = ["deleted"] if deleted else []
    if not status.get("allocation"):
        states += [] if deleted else ["pending"]
    else:
        states.append("allocated")
        if status.get("reservedFor"):
            states.append("reserved")
        elif deleted:
            states.append("deallocating")
    return ",".join(states)


COLUMNS: dict[str, tuple[Column, ...]] = {
    resources.PODS.key: _POD,
    resources.NODES.key: _NODE,
    resources.CORE_EVENTS.key: _event_columns("involvedObject", "message", "source.component"),
    resources.EVENTS_V1.key: _event_columns("regarding", "note", "reportingController"),
    resources.HYPERNODES.key: (
        NAME,
        Column("Tier", _field("spec.tier", "")),
        Column("TierName", _field("spec.tierName", "")),
        Column("NodeCount", _field("status.nodeCount", ""), type="integer"),
        AGE,
    ),
    resources.PODGROUPS.key: (
        NAME,
        Column("STATUS", _field("status.phase", "")),
        Column("minMember", _field("spec.minMember", ""), type="integer"),
        Column("RUNNINGS", _field("status.running", ""), type="integer"),
        Column("AGE", _age),
        Column("QUEUE", _field("spec.queue", ""), priority=1),
    ),
    resources.RESOURCECLAIMS.key: (NAME, Column("State", _claim_state), AGE),
    resources.RESOURCESLICES.key: (
        NAME,
        Column("Node", _field("spec.nodeName", "")),
        Column("Driver", _field("spec.driver", "")),
        Column("Pool", _field("spec.pool.name", "")),
        AGE,
    ),
    resources.LEASES.key: (NAME, Column("Holder", _field("spec.holderIdentity", "")), AGE),
}
_DEFAULT = (NAME, Column("Created At", lambda obj, now: _since(obj["metadata"].get("creationTimestamp"), now)))


def _row_object(obj: Object, include: str) -> Object | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    meta = obj["metadata"]
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}


class TablePrinter:
    """Tables of one resource type in the Table version and `includeObject` form a request asked for."""

    def __init__(self, rtype: ResourceType, variant: tuple[str, str, str], include_object: str) -> None:
        if include_object not in ("None", "Metadata", "Object"):
            raise bad_request(
                f"includeObject: unsupported value {include_object!r}: supported values: None, Metadata, Object"
            )
        self.rtype, self.variant, self.include_object = rtype, variant, include_object

    def table(self, objects: list[Object], revision: str) -> dict[str, Any]:
        """A Table of `objects`: one row each, every column (kubectl hides priority 1 without `-o wide`)."""
        cols = COLUMNS.get(self.rtype.key, _DEFAULT)
        now = time.time()
        rows = []
        for obj in objects:
            row: dict[str, Any] = {"cells": [c.cell(obj, now) for c in cols]}
            partial = _row_object(obj, self.include_object)
            if partial is not None:
                row["object"] = partial
            rows.append(row)
        return {
            "kind": "Table",
            "apiVersion": f"meta.k8s.io/{self.variant[1]}",
            "metadata": {"resourceVersion": revision},
            "columnDefinitions": [c.definition() for c in cols],
            "rows": rows,
        }
