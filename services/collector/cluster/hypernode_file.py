"""HyperNodes from a YAML or JSON file, for clusters without the Volcano CRD (--hypernodes-file).

The file holds HyperNode objects as `kubectl apply` takes them: one or more
YAML documents, each a HyperNode, a list of them, or a `kind: List` with
`items`. JSON is YAML, so a JSON file works too.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import yaml

from schemas.events import HyperNodeEvent
from services.collector.cluster.objects import HyperNode
from services.collector.cluster.publish import BAD_FIELDS
from services.collector.cluster.trackers import KeyedTracker, Outcome

log = logging.getLogger(__name__)


class HyperNodeFileError(ValueError):
    """The file cannot be read as HyperNodes; the message names the document and field."""


def parse_hypernodes(text: str, *, source: str = "hypernodes file") -> list[HyperNode]:
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise HyperNodeFileError(f"{source}: not YAML or JSON: {exc}") from None
    objects: list[tuple[str, Any]] = []
    for i, doc in enumerate(documents):
        if isinstance(doc, list):
            objects += [(f"document {i} item {j}", item) for j, item in enumerate(doc)]
        elif isinstance(doc, dict) and "items" in doc:
            objects += [(f"document {i} items[{j}]", item) for j, item in enumerate(doc.get("items") or [])]
        else:
            objects.append((f"document {i}", doc))
    hypernodes: list[HyperNode] = []
    seen: set[str] = set()
    for where, obj in objects:
        if isinstance(obj, dict) and obj.get("kind", "HyperNode") != "HyperNode":
            raise HyperNodeFileError(f"{source}: {where}: kind {obj['kind']!r} is not HyperNode")
        try:
            hypernode = msgspec.convert(obj, HyperNode)
        except msgspec.ValidationError as exc:
            raise HyperNodeFileError(f"{source}: {where}: {exc}") from None
        name = hypernode.metadata.name
        if not name:
            raise HyperNodeFileError(f"{source}: {where}: metadata.name is required")
        if name in seen:
            raise HyperNodeFileError(f"{source}: {where}: HyperNode {name!r} is defined twice")
        seen.add(name)
        hypernodes.append(hypernode)
    return hypernodes


async def follow_hypernode_file(
    path: str,
    tracker: KeyedTracker[HyperNode, HyperNodeEvent],
    publish: Callable[[Outcome], Awaitable[None]],
    settled: asyncio.Event,
    *,
    resync_seconds: float,
    poll_seconds: float,
    clock: Callable[[], float],
) -> None:
    """Read the file at start, again whenever it changes, and at every resync; `settled` once read."""
    last_mtime: float | None = None
    next_resync = time.monotonic() + resync_seconds
    away = False
    while True:
        try:
            mtime: float | None = os.stat(path).st_mtime
            away = False
        except OSError as exc:
            mtime = last_mtime  # keep the last contents while the file is away
            if not away:
                log.warning("collector.hypernodes_file_unreadable", extra={"fields": {"path": path, "error": str(exc)}})
            away = True
        resync = time.monotonic() >= next_resync
        if mtime != last_mtime or resync:
            hypernodes = _read_hypernode_file(path)
            if hypernodes is not None:
                await publish(tracker.relisted(hypernodes, clock(), force=resync))
                settled.set()
            last_mtime = mtime
            if resync:
                next_resync = time.monotonic() + resync_seconds
        await asyncio.sleep(min(resync_seconds, poll_seconds))  # a poll interval


def _read_hypernode_file(path: str) -> list[HyperNode] | None:
    try:
        with open(path, encoding="utf-8") as f:
            return parse_hypernodes(f.read(), source=path)
    except (OSError, UnicodeDecodeError, HyperNodeFileError) as exc:
        # keep the last good contents: a half-written file must not delete the network tree
        BAD_FIELDS.labels(field="hypernodes_file").inc()
        log.warning("collector.hypernodes_file_unreadable", extra={"fields": {"path": path, "error": str(exc)}})
        return None
