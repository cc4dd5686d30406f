"""Server-side field validation (`?fieldValidation=Strict|Warn|Ignore`), as far as this server knows
the schemas: the top-level fields of each kind, every ObjectMeta field, and duplicate keys. A typo such
as `metdata:` or `sepc:` is caught; an unknown field inside `spec` or `status` is not (no field schemas).
"""

from __future__ import annotations

import json
from typing import Any

from topoplace.dev.kubeapi import resources
from topoplace.dev.kubeapi.errors import bad_request
from topoplace.dev.kubeapi.resources import ResourceType

_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)
_TYPE_META = frozenset({"apiVersion", "kind", "metadata"})
_CORE_EVENT = frozenset(
    {
        "involvedObject",
        "reason",
        "message",
        "source",
        "firstTimestamp",
        "lastTimestamp",
        "count",
        "type",
        "eventTime",
        "series",
        "action",
        "related",
        "reportingComponent",
        "reportingInstance",
    }
)
_EVENT_V1 = frozenset(
    {
        "eventTime",
        "series",
        "reportingController",
        "reportingInstance",
        "action",
        "reason",
        "regarding",
        "related",
        "note",
        "type",
        "deprecatedSource",
        "deprecatedFirstTimestamp",
        "deprecatedLastTimestamp",
        "deprecatedCount",
    }
)


def top_level_fields(rtype: ResourceType) -> frozenset[str]:
    if rtype is resources.CORE_EVENTS:
        return _TYPE_META | _CORE_EVENT
    if rtype is resources.EVENTS_V1:
        return _TYPE_META | _EVENT_V1
    return _TYPE_META | ({"spec", "status"} if rtype.has_status else {"spec"})


def unknown_fields(rtype: ResourceType, raw: bytes) -> list[str]:
    """The problems strict decoding would report, in the real server's words."""
    problems: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for key, _ in items:
            if key in seen:
                problems.append(f'duplicate field "{key}"')
            seen.add(key)
        return dict(items)

    try:
        body = json.loads(raw, object_pairs_hook=pairs)
    except ValueError:
        return []  # not JSON: the body reader reports it
    if not isinstance(body, dict):
        return problems
    allowed = top_level_fields(rtype)
    problems += [f'unknown field "{key}"' for key in body if key not in allowed]
    meta = body.get("metadata")
    if isinstance(meta, dict):
        problems += [f'unknown field "metadata.{key}"' for key in meta if key not in _META_FIELDS]
    return problems


def check(rtype: ResourceType, directive: str, raw: bytes) -> list[str]:
    """Raise 400 under Strict; the warnings to send under Warn; nothing under Ignore (the default)."""
    mode = directive.lower()
    if mode not in ("strict", "warn"):
        if directive and mode != "ignore":
            raise bad_request(f"fieldValidation: invalid value {directive!r}: supported values: Ignore, Warn, Strict")
        return []
    problems = unknown_fields(rtype, raw)
    if problems and mode == "strict":
        raise bad_request(
            f'{rtype.kind} in version "{rtype.version}" cannot be handled as a {rtype.kind}: '
            f"strict decoding error: {', '.join(problems)}"
        )
    return problems
