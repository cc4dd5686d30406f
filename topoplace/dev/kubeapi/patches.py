"""The three PATCH flavours: JSON merge patch, strategic merge patch (subset), JSON patch."""

from __future__ import annotations

import copy
from typing import Any

from topoplace.dev.kubeapi.errors import ApiError, bad_request

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"

# Lists the strategic merge patch merges by a key instead of replacing (the ones we meet).
_MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "conditions": "type",
    "tolerations": "key",
    "ownerReferences": "uid",
    "resourceClaims": "name",  # pod spec
    "resourceClaimStatuses": "name",  # pod status
    "reservedFor": "uid",  # ResourceClaim status
    "finalizers": "",  # a set of scalars
}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Like a merge patch, but known lists merge by their key (containers by name, ...)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue  # directives ($patch, $retainKeys...) are not supported; ignored
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in _MERGE_KEYS and isinstance(result.get(key), list):
            result[key] = _merge_list(result[key], value, _MERGE_KEYS[key])
        else:
            result[key] = strategic_merge_patch(result.get(key), value)
    return result


def _merge_list(current: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    if not merge_key:
        return current + [v for v in patch if v not in current]
    merged = list(current)
    index = {item.get(merge_key): i for i, item in enumerate(merged) if isinstance(item, dict)}
    for item in patch:
        if not isinstance(item, dict):
            continue
        at = index.get(item.get(merge_key))
        if at is None:
            index[item.get(merge_key)] = len(merged)
            merged.append(item)
        else:
            merged[at] = strategic_merge_patch(merged[at], item)
    return merged


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 add / remove / replace / test (move and copy are not supported)."""
    if not isinstance(operations, list):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request("the JSON patch operation must have 'op' and 'path'")
        doc = _apply_operation(doc, op)
    return doc


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _apply_operation(doc: Any, op: dict[str, Any]) -> Any:
    kind, parts = op["op"], _pointer(op["path"])
    if not parts:
        raise bad_request("a JSON patch on the whole document is not supported")
    parent: Any = doc
    for part in parts[:-1]:
        try:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise ApiError(422, "Invalid", f"the path {op['path']!r} does not exist") from None
    last = parts[-1]
    if isinstance(parent, list):
        idx = len(parent) if last == "-" else int(last)
        if kind == "add":
            parent.insert(idx, op.get("value"))
        elif kind == "remove":
            parent.pop(idx)
        elif kind == "replace":
            parent[idx] = op.get("value")
        elif kind == "test":
            if parent[idx] != op.get("value"):
                raise ApiError(422, "Invalid", f"testing value {op['path']} failed")
        else:
            raise bad_request(f"unsupported JSON patch operation {kind!r}")
        return doc
    if not isinstance(parent, dict):
        raise ApiError(422, "Invalid", f"the path {op['path']!r} does not exist")
    if kind in ("add", "replace"):
        if kind == "replace" and last not in parent:
            raise ApiError(422, "Invalid", f"the path {op['path']!r} does not exist")
        parent[last] = op.get("value")
    elif kind == "remove":
        if last not in parent:
            raise ApiError(422, "Invalid", f"the path {op['path']!r} does not exist")
        del parent[last]
    elif kind == "test":
        if parent.get(last) != op.get("value"):
            raise ApiError(422, "Invalid", f"testing value {op['path']} failed")
    else:
        raise bad_request(f"unsupported JSON patch operation {kind!r}")
    return doc


def apply_patch(content_type: str, target: dict[str, Any], body: Any) -> dict[str, Any]:
    media = content_type.split(";")[0].strip().lower()
    if media == JSON_PATCH:
        result = json_patch(target, body)
    elif media == MERGE:
        result = merge_patch(target, body)
    elif media == STRATEGIC:
        result = strategic_merge_patch(target, body)
    else:
        raise ApiError(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: "
            f"{JSON_PATCH}, {MERGE}, {STRATEGIC}",
        )
    if not isinstance(result, dict):
        raise bad_request("the patch must leave an object")
    return result
