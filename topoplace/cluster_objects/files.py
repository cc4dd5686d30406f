"""Kubernetes objects from files, as `kubectl get ... -A -o json` (or `-o yaml`) prints them.

A file holds one object, a `List` (or `NodeList`, `PodList`...) with `items`,
or several YAML documents, each of either kind. Every object comes out with
where it was found (`FILE: items[3]`, `FILE: document 2`), so a problem names
the file and the field.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import yaml


class ClusterInputError(ValueError):
    """A file the command cannot use: its message is one line naming the file, the field and the reason."""

    def __init__(self, where: str, field: str, reason: str) -> None:
        super().__init__(f"{where}: {field}: {reason}" if field else f"{where}: {reason}")


class ClusterObject(msgspec.Struct, frozen=True, kw_only=True):
    """One object as read: its kind, and where it was found (for messages)."""

    kind: str
    where: str  # "cluster.json: items[3]"
    body: dict[str, Any]


def _documents(path: str) -> list[Any]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ClusterInputError(path, "", exc.strerror or str(exc)) from None
    except UnicodeDecodeError as exc:
        raise ClusterInputError(path, "", f"not UTF-8 text ({exc.reason})") from None
    if text.lstrip().startswith(("{", "[")):
        try:
            return [msgspec.json.decode(text)]
        except msgspec.DecodeError as exc:
            raise ClusterInputError(path, "", f"not JSON: {exc}") from None
    try:
        return [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        raise ClusterInputError(path, "", f"not YAML: {' '.join(str(exc).split())}") from None


def read_objects(path: str) -> list[ClusterObject]:
    """Every object of the file, Lists flattened, in file order. Raises ClusterInputError."""
    documents = _documents(path)
    several = len(documents) > 1
    found: list[ClusterObject] = []
    for number, document in enumerate(documents, start=1):
        where = f"{path}: document {number}" if several else path
        found.extend(_flattened(document, where, ""))
    return found


def _flattened(document: Any, where: str, field: str) -> Iterator[ClusterObject]:
    if not isinstance(document, dict):
        raise ClusterInputError(
            where, field or "(top level)", f"expected a Kubernetes object, got {_kind_of(document)}"
        )
    kind = document.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ClusterInputError(where, f"{field}.kind" if field else "kind", "every object needs its kind")
    if kind == "List" or (kind.endswith("List") and "items" in document):
        items = document.get("items")
        if items is None:
            items = []
        if not isinstance(items, list):
            raise ClusterInputError(where, f"{field}.items" if field else "items", "must be a list")
        for i, item in enumerate(items):
            item_field = f"{field}.items[{i}]" if field else f"items[{i}]"
            yield from _flattened(item, where, item_field)
        return
    yield ClusterObject(kind=kind, where=f"{where}: {field}" if field else where, body=document)


def _kind_of(value: object) -> str:
    return "a list" if isinstance(value, list) else type(value).__name__
