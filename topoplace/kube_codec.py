"""The Kubernetes API's JSON, decoded with msgspec: what every service reads the same way.

The envelope of every reply (a list, a watch event, a Status), shared by the binder,
the cluster watcher and the informer that feeds both (topoplace.informer). Each
service decodes the objects themselves into its own Structs, reading only the fields
it needs (services/binder/kube_objects.py, services/collector/cluster/objects.py): decoding the raw bytes
skips kubernetes-asyncio's models, which cost most of the client's CPU per object.
Unknown fields are ignored; a field of the wrong type fails the decode with msgspec's
error, which names the field.
"""

from __future__ import annotations

import msgspec


class VersionMeta(msgspec.Struct, kw_only=True, rename="camel"):
    name: str = ""
    resource_version: str = ""


class ListMeta(msgspec.Struct, kw_only=True, rename="camel"):
    resource_version: str = ""


class ObjectList(msgspec.Struct, kw_only=True):
    """A list reply, its items still raw: each item is decoded alone so one bad object costs only itself."""

    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    items: list[msgspec.Raw] = []


class WatchEvent(msgspec.Struct, kw_only=True):
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK or ERROR
    object: msgspec.Raw


class Versioned(msgspec.Struct, kw_only=True):
    """Any object, for its name and version alone (a bookmark's resourceVersion, a bad object's name)."""

    metadata: VersionMeta = msgspec.field(default_factory=VersionMeta)


class ApiStatus(msgspec.Struct, kw_only=True):
    """A Kubernetes Status object (error replies, and ERROR events in a watch)."""

    code: int = 0
    reason: str = ""
    message: str = ""


def status_message(body: bytes, status: int) -> str:
    """The server's Status message when it sent one, else the bare HTTP status."""
    try:
        decoded = msgspec.json.decode(body, type=ApiStatus)
    except (msgspec.DecodeError, msgspec.ValidationError):
        decoded = None
    if decoded is not None and decoded.message:
        return f"HTTP {status}: {decoded.message}"
    return f"HTTP {status}"
