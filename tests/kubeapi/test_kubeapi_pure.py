"""Selectors, patches and the store's change log, without HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from topoplace.dev.kubeapi import ApiError, ObjectStore, parse_selector
from topoplace.dev.kubeapi.changes import visible_change
from topoplace.dev.kubeapi.patches import json_patch, merge_patch, strategic_merge_patch
from topoplace.dev.kubeapi.resources import PODS


def obj(labels: dict[str, str] | None = None, **fields: object) -> dict[str, Any]:
    return {"metadata": {"name": "x", "labels": labels or {}}, **fields}


@pytest.mark.parametrize("bad", ["a in (x", "!a in (x)", "a b"])
def test_bad_label_selector_is_400(bad: str) -> None:
    with pytest.raises(ApiError) as err:
        parse_selector(bad, "", PODS.field_labels)
    assert err.value.code == 400


def test_field_selector_reads_missing_fields_as_empty_and_bools_as_words() -> None:
    sel = parse_selector("", "spec.nodeName=,spec.hostNetwork=true", PODS.field_labels)
    assert sel.matches(obj(spec={"hostNetwork": True}))
    assert not sel.matches(obj(spec={"hostNetwork": True, "nodeName": "n"}))
    assert not sel.matches(obj(spec={}))


def test_selectors_combine_with_and() -> None:
    sel = parse_selector("a=1", "status.phase!=Running", PODS.field_labels)
    assert sel.matches(obj({"a": "1"}, status={"phase": "Pending"}))
    assert not sel.matches(obj({"a": "1"}, status={"phase": "Running"}))
    assert not sel.matches(obj({"a": "2"}, status={"phase": "Pending"}))


def test_merge_patch_null_deletes_and_objects_merge() -> None:
    assert merge_patch({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"b": None, "d": 3}, "l": [2]}) == {
        "a": {"c": 2, "d": 3},
        "l": [2],
    }


def test_strategic_patch_merges_containers_by_name() -> None:
    target = {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}
    patched = strategic_merge_patch(target, {"containers": [{"name": "b", "image": "2"}, {"name": "c", "image": "3"}]})
    assert patched["containers"] == [
        {"name": "a", "image": "1"},
        {"name": "b", "image": "2"},
        {"name": "c", "image": "3"},
    ]
    assert target["containers"][1]["image"] == "1"  # the original is untouched


def test_json_patch_test_failure_is_422() -> None:
    with pytest.raises(ApiError) as err:
        json_patch({"a": 1}, [{"op": "test", "path": "/a", "value": 2}])
    assert err.value.code == 422
    assert json_patch({"a": [1, 2]}, [{"op": "add", "path": "/a/-", "value": 3}, {"op": "remove", "path": "/a/0"}]) == {
        "a": [2, 3]
    }


def test_change_log_is_bounded_and_old_versions_are_gone() -> None:
    store = ObjectStore(log_size=100)
    store.create("nodes", {"metadata": {"name": "n"}})
    for i in range(1_000):
        store.patch("nodes", "n", "application/merge-patch+json", {"metadata": {"labels": {"i": str(i)}}})
    assert len(store._log) == 100
    with pytest.raises(ApiError) as err:
        store.subscribe("nodes", None, 1)
    assert err.value.code == 410
    initial, _ = store.subscribe("nodes", None, store.revision - 10)
    assert [c.revision for c in initial] == list(range(store.revision - 9, store.revision + 1))


def test_writes_never_change_an_object_already_handed_out() -> None:
    store = ObjectStore()
    first = store.create("nodes", {"metadata": {"name": "n", "labels": {"a": "1"}}})
    store.patch("nodes", "n", "application/strategic-merge-patch+json", {"spec": {"unschedulable": True}})
    assert first["metadata"]["resourceVersion"] == "1"
    assert "spec" not in first


def test_visible_change_moves_objects_in_and_out_of_a_selection() -> None:
    store = ObjectStore()
    sel = parse_selector("gpu=yes", "", PODS.field_labels)
    store.create("nodes", {"metadata": {"name": "n"}})
    _, sub = store.subscribe("nodes", None, store.revision)
    store.patch("nodes", "n", "application/merge-patch+json", {"metadata": {"labels": {"gpu": "yes"}}})
    store.patch("nodes", "n", "application/merge-patch+json", {"metadata": {"labels": {"x": "1"}}})
    store.patch("nodes", "n", "application/merge-patch+json", {"metadata": {"labels": {"gpu": None}}})
    store.patch("nodes", "n", "application/merge-patch+json", {"metadata": {"labels": {"y": "1"}}})
    store.delete("nodes", "n")
    seen = [visible_change(c, sel) for c in sub.pending]
    assert seen == ["ADDED", "MODIFIED", "DELETED", None, None]


def test_unknown_resource_name_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="resource: unknown resource type 'pod'"):
        ObjectStore().create("pod", {"metadata": {"name": "x"}})
