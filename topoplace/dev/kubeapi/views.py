"""How objects leave the server: in the version a request's URL names (`View`), as plain JSON or as the
Table kubectl asks for, one by one or as the events of a watch stream."""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from topoplace.dev.kubeapi import discovery, media
from topoplace.dev.kubeapi.changes import Change, visible_change
from topoplace.dev.kubeapi.resources import ResourceType
from topoplace.dev.kubeapi.selectors import Selector
from topoplace.dev.kubeapi.tables import TablePrinter

_encoder = msgspec.json.Encoder()


class View:
    """A resource type as one of its served versions shows it: objects are stored in the type's
    own version; another served version of the same schema only changes their apiVersion."""

    def __init__(self, rtype: ResourceType, version: str) -> None:
        self.rtype = rtype
        self.version = version
        self.api_version = rtype.api_version_of(version)
        self.is_storage = version == rtype.version

    def out(self, obj: dict[str, Any]) -> dict[str, Any]:
        return obj if self.is_storage else {**obj, "apiVersion": self.api_version}

    def list_body(self, items: list[dict[str, Any]], revision: int) -> dict[str, Any]:
        return {
            "kind": f"{self.rtype.kind}List",
            "apiVersion": self.api_version,
            "metadata": {"resourceVersion": str(revision)},
            "items": items if self.is_storage else [self.out(o) for o in items],
        }


class WatchEvents:
    """The watch events one stream sends: its selector applied, each object in the stream's version,
    as a one-row Table when kubectl asked for Tables (column definitions in the first one only)."""

    def __init__(self, view: View, selector: Selector, printer: TablePrinter | None) -> None:
        self.view, self.selector, self.printer = view, selector, printer
        self.columns_sent = False

    def _encoded(self, change: Change) -> bytes:
        if self.printer is not None:
            row = self.printer.table([self.view.out(change.obj)], change.obj["metadata"]["resourceVersion"])
            if self.columns_sent:
                row["columnDefinitions"] = []
            self.columns_sent = True
            return _encoder.encode(row)
        return change.object_json() if self.view.is_storage else _encoder.encode(self.view.out(change.obj))

    async def write(self, resp: web.StreamResponse, changes: list[Change]) -> None:
        lines: list[bytes] = []
        for change in changes:
            kind = visible_change(change, self.selector)
            if kind is not None:
                lines.append(b'{"type":"' + kind.encode() + b'","object":' + self._encoded(change) + b"}\n")
        if lines:
            await resp.write(b"".join(lines))


def table_printer(view: View, request: web.Request) -> TablePrinter | None:
    """A printer when the Accept header asks for a Table first; None for plain JSON; 406 for neither."""
    variant = media.choose(request.headers.get("Accept", ""), (media.TABLE_V1, media.TABLE_V1BETA1))
    if variant is None:
        raise discovery.not_acceptable()
    if variant == media.PLAIN:
        return None
    return TablePrinter(view.rtype, variant, request.query.get("includeObject", "Metadata"))


def table_response(printer: TablePrinter, objects: list[dict[str, Any]], revision: str) -> web.Response:
    body = _encoder.encode(printer.table(objects, revision))
    return web.Response(body=body, headers={"Content-Type": media.content_type(printer.variant)})
