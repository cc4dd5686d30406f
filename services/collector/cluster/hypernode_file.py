"""HyperNodes from a YAML or JSON file, for clusters without the Volcano CRD.

The file holds HyperNode objects as `kubectl apply` takes them: one or more
YAML documents, each a HyperNode, a list of them, or a `kind: List` with
`items`. JSON is YAML, so a JSON file works too.
"""

from __future__ import annotations

from typing import Any

import msgspec
import yaml

from services.collector.cluster.objects import HyperNode


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
