"""Input files read strictly: an unknown field is an error that names its path, not a key dropped in silence.

msgspec ignores unknown keys when it decodes, which is right on the wire (a newer producer may add a
field) and wrong for a file a user wrote: a misspelled `redy` or a Kubernetes-style `nodeSelector`
would be dropped and the pod placed as if it had none. `strict_convert` walks the decoded JSON along
the target type first: each unknown key is reported with its path and the closest field's name, and a
camelCase key whose snake_case form is a field (`nodeSelector` -> `node_selector`) is taken as that
field, since users write Kubernetes' spelling. Kubernetes objects embedded in an input (a PodGroup as
kubectl prints it) are `lenient`: they carry many fields the engine does not read.
"""

from __future__ import annotations

import difflib
import re
from typing import Any, TypeVar

import msgspec
from msgspec import inspect

T = TypeVar("T")

SHOWN_PROBLEMS = 5  # an error stays one readable line

_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])([A-Z])")


def snake_case(name: str) -> str:
    """`nodeSelector` -> `node_selector`; a snake_case name stays as it is."""
    return _CAMEL_HUMP.sub(r"_\1", name).lower()


def strict_convert(raw: object, target: type[T], *, lenient: tuple[type, ...] = ()) -> T:
    """`raw` (decoded JSON) as `target`; ValueError names every unknown field's path, or msgspec's error."""
    problems: list[str] = []
    renamed = _walk(raw, inspect.type_info(target), "$", frozenset(lenient), problems)
    if problems:
        more = f"; and {len(problems) - SHOWN_PROBLEMS} more" if len(problems) > SHOWN_PROBLEMS else ""
        raise ValueError("; ".join(problems[:SHOWN_PROBLEMS]) + more)
    try:
        return msgspec.convert(renamed, type=target)
    except msgspec.ValidationError as exc:
        raise ValueError(str(exc)) from None


def _walk(raw: object, info: inspect.Type, path: str, lenient: frozenset[type], problems: list[str]) -> object:
    """`raw` with camelCase keys of our own Structs renamed, appending each unknown field to `problems`."""
    if isinstance(info, inspect.UnionType):
        structs = [t for t in info.types if isinstance(t, inspect.StructType)]
        return _walk(raw, structs[0], path, lenient, problems) if len(structs) == 1 else raw
    if isinstance(info, inspect.StructType) and isinstance(raw, dict):
        return raw if info.cls in lenient else _walk_struct(raw, info, path, lenient, problems)
    sequence = inspect.ListType | inspect.VarTupleType | inspect.SetType | inspect.FrozenSetType
    if isinstance(info, sequence) and isinstance(raw, list):
        return [_walk(item, info.item_type, f"{path}[{i}]", lenient, problems) for i, item in enumerate(raw)]
    if isinstance(info, inspect.TupleType) and isinstance(raw, list):
        return [
            _walk(item, item_info, f"{path}[{i}]", lenient, problems)
            for i, (item, item_info) in enumerate(zip(raw, info.item_types, strict=False))
        ] + raw[len(info.item_types) :]
    if isinstance(info, inspect.DictType) and isinstance(raw, dict):
        return {key: _walk(value, info.value_type, f"{path}.{key}", lenient, problems) for key, value in raw.items()}
    return raw


def _walk_struct(
    raw: dict[str, Any], info: inspect.StructType, path: str, lenient: frozenset[type], problems: list[str]
) -> dict[str, Any]:
    fields = {field.encode_name: field for field in info.fields}
    result: dict[str, Any] = {}
    for key, value in raw.items():
        name = key if key in fields else snake_case(key)
        field = fields.get(name)
        if field is None:
            problems.append(f"{path}.{key}: unknown field{_did_you_mean(key, fields)}")
            continue
        if name != key and name in raw:
            problems.append(f"{path}.{key}: given twice, also as {name}")
            continue
        result[name] = _walk(value, field.type, f"{path}.{name}", lenient, problems)
    return result


def _did_you_mean(key: str, fields: dict[str, inspect.Field]) -> str:
    close = difflib.get_close_matches(snake_case(key), list(fields), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else f" (fields: {', '.join(sorted(fields))})"
