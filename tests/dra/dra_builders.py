"""Small builders for DRA objects: slices, classes, claims, as Kubernetes writes them."""

from __future__ import annotations

from typing import Any

import msgspec

from engine.node.dra import AllocationInput, CelPrograms, DeviceClass, NodeView, ResourceClaim, ResourceSlice, allocate
from engine.node.dra.model import AllocationResult

DRIVER = "gpu.example.com"
NODE = NodeView(name="node-1", labels={"zone": "a"})


def attrs(**values: Any) -> dict[str, Any]:
    """Attribute map: ints, bools, strings; a value "v:1.2.3" is a version."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        key = name.replace("__", "/")
        if isinstance(value, bool):
            out[key] = {"bool": value}
        elif isinstance(value, int):
            out[key] = {"int": value}
        elif isinstance(value, str) and value.startswith("v:"):
            out[key] = {"version": value[2:]}
        else:
            out[key] = {"string": value}
    return out


def device(name: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name}
    body.update(extra)
    return body


def slice_(
    devices: list[dict[str, Any]],
    *,
    driver: str = DRIVER,
    pool: str = "pool-1",
    generation: int = 1,
    count: int = 1,
    node: str | None = "node-1",
    name: str = "",
    **spec: Any,
) -> ResourceSlice:
    body: dict[str, Any] = {
        "metadata": {"name": name or f"{pool}-{driver}-{generation}"},
        "spec": {
            "driver": driver,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            "devices": devices,
            **spec,
        },
    }
    if node is not None:
        body["spec"]["nodeName"] = node
    return msgspec.convert(body, ResourceSlice)


def device_class(name: str = "gpu", selectors: tuple[str, ...] = (), config: list[Any] | None = None) -> DeviceClass:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": s}} for s in selectors]}
    if config:
        spec["config"] = config
    return msgspec.convert({"metadata": {"name": name}, "spec": spec}, DeviceClass)


def exact(name: str, count: int = 1, cls: str = "gpu", *selectors: str, **extra: Any) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls, "count": count, **extra}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name, "exactly": exactly}


def claim(
    requests: list[dict[str, Any]],
    constraints: list[dict[str, Any]] | None = None,
    config: list[dict[str, Any]] | None = None,
    name: str = "claim-1",
) -> ResourceClaim:
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    body = {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": {"devices": devices}}
    return msgspec.convert(body, ResourceClaim)


def run(
    claims: list[ResourceClaim],
    slices: list[ResourceSlice],
    classes: list[DeviceClass] | None = None,
    *,
    allocated: frozenset[tuple[str, str, str]] = frozenset(),
    node: NodeView = NODE,
    **kwargs: Any,
) -> tuple[AllocationResult, ...] | None:
    given = AllocationInput(
        slices=tuple(slices),
        classes={c.metadata.name: c for c in (classes if classes is not None else [device_class()])},
        allocated=allocated,
    )
    return allocate(node, claims, given, CelPrograms(), **kwargs)


def picked(results: tuple[AllocationResult, ...] | None) -> list[list[tuple[str, str]]] | None:
    """Per claim: (request, device) pairs."""
    if results is None:
        return None
    return [[(r.request, r.device) for r in result.devices.results] for result in results]
