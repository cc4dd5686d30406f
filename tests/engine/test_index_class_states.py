"""The index hands out one state per live class: what is kept of a state by identity (its device loads) is
then built once for every request that evaluates the class, and a class that empties lets its state go."""

from __future__ import annotations

import msgspec
from engine_builders import fixture_node

from engine import Allocation, Engine


def test_a_class_state_is_one_object_while_the_class_lives() -> None:
    index = Engine().new_index()
    a = fixture_node("a", "dgx1-v100")
    b = fixture_node("b", "dgx1-v100")
    index.upsert(a)
    index.upsert(b)
    class_id = index.class_id("a")
    assert index.class_id("b") == class_id
    first = index.class_state(class_id)
    assert index.class_state(class_id) is first
    assert first.name == ""  # nameless, as before
    busy = Allocation(pod_uid="p", index=0)
    index.upsert(msgspec.structs.replace(a, allocations=(busy,)))
    index.upsert(msgspec.structs.replace(b, allocations=(busy,)))  # the idle class empties
    assert not index.is_live(class_id)
    index.upsert(a)  # and comes back: the same id, its state built afresh and equal
    assert index.class_id("a") == class_id
    again = index.class_state(class_id)
    assert again is not first
    assert again == first
