"""What the API server and the traces file say after a run, read into plain answers (pure)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import msgspec

from schemas.annotations import DEVICES, NODE, decode_devices
from schemas.events import DeviceAssignment
from topoplace.telemetry import SpanRecord

WHOLE_DEVICE_CORES = 100
PIPELINE_SERVICES = frozenset({"topoplace-collector", "topoplace-placer", "topoplace-binder"})


class PodState(msgspec.Struct, frozen=True, kw_only=True):
    """A pod as the API server holds it: its node and the devices annotated on it."""

    uid: str
    name: str
    node: str
    annotated_node: str
    devices: tuple[DeviceAssignment, ...]


def pod_state(pod: dict[str, Any]) -> PodState:
    meta = pod["metadata"]
    annotations = meta.get("annotations") or {}
    return PodState(
        uid=meta["uid"],
        name=meta["name"],
        node=(pod.get("spec") or {}).get("nodeName") or "",
        annotated_node=annotations.get(NODE, ""),
        devices=decode_devices(annotations[DEVICES]) if DEVICES in annotations else (),
    )


def double_booked(pods: Iterable[PodState]) -> list[str]:
    """Every device handed out beyond its capacity, in words: a whole device shared, or over 100 % cores."""
    holders: dict[tuple[str, int], list[tuple[str, DeviceAssignment]]] = defaultdict(list)
    for pod in pods:
        if pod.node:
            for device in pod.devices:
                holders[(pod.node, device.index)].append((pod.name, device))
    problems = []
    for (node, index), held in sorted(holders.items()):
        whole = [name for name, d in held if d.memory_mib == 0 and d.cores >= WHOLE_DEVICE_CORES]
        cores = sum(d.cores for _, d in held)
        if (whole and len(held) > 1) or cores > WHOLE_DEVICE_CORES:
            problems.append(f"{node} device {index} given to {sorted(name for name, _ in held)}")
    return problems


def bindings_per_pod(changes: Iterable[Any]) -> dict[str, int]:
    """How often each pod went from no node to a node, from the API server's change log."""
    counts: dict[str, int] = defaultdict(int)
    for change in changes:
        old_node = ((change.old or {}).get("spec") or {}).get("nodeName")
        new_node = (change.obj.get("spec") or {}).get("nodeName")
        if change.type == "MODIFIED" and new_node and not old_node:
            counts[change.obj["metadata"]["uid"]] += 1
    return dict(counts)


def services_by_trace(spans: Iterable[SpanRecord]) -> dict[str, set[str]]:
    by_trace: dict[str, set[str]] = defaultdict(set)
    for span in spans:
        by_trace[span.trace_id].add(span.service_name)
    return dict(by_trace)


def spans_of(spans: Iterable[SpanRecord], trace_id: str, name: str) -> list[SpanRecord]:
    return [s for s in spans if s.trace_id == trace_id and s.name == name]
