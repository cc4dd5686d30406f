"""Hypothesis strategies for the fuzz tests: arbitrary JSON, valid events of a Struct type, and
near-valid events (a valid one with one field removed, replaced or retyped)."""

from __future__ import annotations

from typing import Any

import msgspec
import msgspec.inspect as mi
from hypothesis import strategies as st

from schemas.events import SCHEMA_VERSION

Json = Any

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
ANY_JSON: st.SearchStrategy[Json] = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=8,
)


def valid_value(t: mi.Type, depth: int = 0) -> st.SearchStrategy[Json]:
    """JSON that msgspec decodes as `t` (constraints such as patterns are not all honoured; a
    value that misses one is still a fair input: the decoder must reject it by name)."""
    if isinstance(t, mi.StructType):
        required = {f.encode_name: valid_value(f.type, depth + 1) for f in t.fields if f.required}
        optional = {f.encode_name: valid_value(f.type, depth + 1) for f in t.fields if not f.required}
        return st.fixed_dictionaries(required, optional=optional if depth < 2 else {})
    if isinstance(t, mi.IntType):
        lo = t.ge if t.ge is not None else (t.gt + 1 if t.gt is not None else -(2**40))
        hi = t.le if t.le is not None else (t.lt - 1 if t.lt is not None else 2**40)
        return st.integers(min_value=lo, max_value=hi)
    if isinstance(t, mi.FloatType):
        return st.floats(
            min_value=t.ge if t.ge is not None else t.gt,
            max_value=t.le if t.le is not None else t.lt,
            exclude_min=t.gt is not None and t.ge is None,
            exclude_max=t.lt is not None and t.le is None,
            allow_nan=False,
            allow_infinity=False,
        )
    if isinstance(t, mi.StrType):
        return st.text(min_size=t.min_length or 0, max_size=min(t.max_length or 12, 12))
    if isinstance(t, mi.BoolType):
        return st.booleans()
    if isinstance(t, mi.NoneType):
        return st.none()
    if isinstance(t, mi.EnumType):
        return st.sampled_from([m.value for m in t.cls])
    if isinstance(t, mi.LiteralType):
        return st.sampled_from(list(t.values))
    if isinstance(t, mi.ListType | mi.VarTupleType | mi.SetType | mi.FrozenSetType):
        return st.lists(valid_value(t.item_type, depth + 1), max_size=0 if depth >= 3 else 2)
    if isinstance(t, mi.TupleType):
        return st.tuples(*(valid_value(i, depth + 1) for i in t.item_types)).map(list)
    if isinstance(t, mi.DictType):
        return st.dictionaries(valid_value(t.key_type, depth + 1), valid_value(t.value_type, depth + 1), max_size=2)
    if isinstance(t, mi.UnionType):
        return st.one_of(*(valid_value(u, depth + 1) for u in t.types))
    if isinstance(t, mi.Metadata):
        return valid_value(t.type, depth)
    return ANY_JSON


def events_of(event_type: type[msgspec.Struct]) -> st.SearchStrategy[dict[str, Json]]:
    """Valid events of `event_type`, at the schema version the services read."""
    events: st.SearchStrategy[dict[str, Json]] = valid_value(mi.type_info(event_type))
    return events.map(lambda e: {**e, "schema_version": SCHEMA_VERSION} if "schema_version" in e else e)


def _paths(value: Json, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _mutated(value: Json, path: tuple[str | int, ...], action: str, replacement: Json) -> Json:
    head, rest = path[0], path[1:]
    copy: Any = dict(value) if isinstance(value, dict) else list(value)
    if rest:
        copy[head] = _mutated(copy[head], rest, action, replacement)
    elif action == "delete":
        del copy[head]
    else:
        copy[head] = replacement
    return copy


@st.composite
def near_valid(draw: st.DrawFn, event_type: type[msgspec.Struct]) -> bytes:
    """A valid event of `event_type` with one change: a field deleted or given any JSON value, or an
    unknown top-level field added, or schema_version changed."""
    event = draw(events_of(event_type))
    paths = _paths(event)
    action = draw(st.sampled_from(["delete", "replace", "add", "version"] if paths else ["add", "version"]))
    if action == "add":
        event = {**event, draw(st.text(min_size=1, max_size=10)): draw(ANY_JSON)}
    elif action == "version":
        event = {**event, "schema_version": draw(st.one_of(st.integers(), ANY_JSON))}
    else:
        path = draw(st.sampled_from(paths))
        event = _mutated(event, path, action, draw(ANY_JSON))
    return msgspec.json.encode(event)
