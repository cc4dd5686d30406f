"""List + watch: no gap, no replay of the past, 410 when too old, selectors, bookmarks, timeouts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kube_clients import client_for
from kubeapi_support import CoreApi, pod_body
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from topoplace.dev.kubeapi import KubeApiServer, ObjectStore


async def collect(stream: watch.Watch, count: int, timeout: float = 5.0) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []

    async def read() -> None:
        async for event in stream:
            events.append(event)
            if len(events) == count:
                return

    await asyncio.wait_for(read(), timeout)
    return events


async def test_watch_from_list_sees_later_changes_and_no_earlier_ones(core: CoreApi) -> None:
    await core.create_namespaced_pod("default", pod_body("before"))
    listed = await core.list_namespaced_pod("default")
    async with watch.Watch() as w:
        stream = w.stream(
            core.list_namespaced_pod, "default", resource_version=listed.metadata.resource_version, timeout_seconds=5
        )
        await core.create_namespaced_pod("default", pod_body("after"))
        await core.patch_namespaced_pod("after", "default", {"metadata": {"labels": {"x": "1"}}})
        await core.delete_namespaced_pod("after", "default")
        events = await collect(stream, 3)
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "after"),
        ("MODIFIED", "after"),
        ("DELETED", "after"),
    ]
    revisions = [int(e["object"].metadata.resource_version) for e in events]
    assert revisions == sorted(revisions) and revisions[0] > int(listed.metadata.resource_version)


async def test_changes_between_list_and_watch_are_not_lost(core: CoreApi) -> None:
    listed = await core.list_namespaced_pod("default")
    await core.create_namespaced_pod("default", pod_body("in-the-gap"))
    async with watch.Watch() as w:
        stream = w.stream(
            core.list_namespaced_pod, "default", resource_version=listed.metadata.resource_version, timeout_seconds=5
        )
        events = await collect(stream, 1)
    assert events[0]["type"] == "ADDED" and events[0]["object"].metadata.name == "in-the-gap"


async def test_watch_without_version_starts_with_the_current_objects(core: CoreApi) -> None:
    await core.create_namespaced_pod("default", pod_body("one"))
    await core.create_namespaced_pod("default", pod_body("two"))
    async with watch.Watch() as w:
        events = await collect(w.stream(core.list_namespaced_pod, "default", timeout_seconds=5), 2)
    assert sorted((e["type"], e["object"].metadata.name) for e in events) == [("ADDED", "one"), ("ADDED", "two")]


@pytest.fixture
async def tiny_log_server() -> AsyncIterator[KubeApiServer]:
    async with KubeApiServer(store=ObjectStore(log_size=3)) as server:
        yield server


async def test_too_old_resource_version_is_410(tiny_log_server: KubeApiServer) -> None:
    api = client_for(tiny_log_server.url)
    core: CoreApi = client.CoreV1Api(api)
    try:
        first = await core.create_namespaced_pod("default", pod_body("old"))
        for i in range(5):  # push the first change out of the 3-entry log
            await core.patch_namespaced_pod("old", "default", {"metadata": {"labels": {"i": str(i)}}})
        async with watch.Watch() as w:
            stream = w.stream(
                core.list_namespaced_pod, "default", resource_version=first.metadata.resource_version, timeout_seconds=5
            )
            with pytest.raises(ApiException) as err:
                await collect(stream, 1)
        assert err.value.status == 410
        # a version still in the log works
        recent = (await core.read_namespaced_pod("old", "default")).metadata.resource_version
        async with watch.Watch() as w:
            stream = w.stream(core.list_namespaced_pod, "default", resource_version=recent, timeout_seconds=5)
            await core.delete_namespaced_pod("old", "default")
            assert [e["type"] for e in await collect(stream, 1)] == ["DELETED"]
    finally:
        await api.close()


async def test_too_old_watch_streams_an_error_event_with_a_gone_status(tiny_log_server: KubeApiServer) -> None:
    store = tiny_log_server.store
    store.create("nodes", {"metadata": {"name": "n"}})
    for i in range(5):
        store.patch("nodes", "n", "application/merge-patch+json", {"metadata": {"labels": {"i": str(i)}}})
    api = client_for(tiny_log_server.url)
    try:
        core: CoreApi = client.CoreV1Api(api)
        resp = await core.list_node(watch=True, resource_version="1", _preload_content=False)
        event = json.loads(await resp.content.readline())
        resp.release()
    finally:
        await api.close()
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"


async def test_field_selector_on_list_and_watch_turns_binding_into_deleted(core: CoreApi) -> None:
    await core.create_namespaced_pod("default", pod_body("ours"))
    await core.create_namespaced_pod("default", pod_body("theirs", scheduler="default-scheduler"))
    selector = "spec.schedulerName=topoplace,spec.nodeName="
    listed = await core.list_namespaced_pod("default", field_selector=selector)
    assert [p.metadata.name for p in listed.items] == ["ours"]
    async with watch.Watch() as w:
        stream = w.stream(
            core.list_namespaced_pod,
            "default",
            field_selector=selector,
            resource_version=listed.metadata.resource_version,
            timeout_seconds=5,
        )
        await core.create_namespaced_pod("default", pod_body("theirs-2", scheduler="default-scheduler"))
        await core.create_namespaced_pod("default", pod_body("ours-2"))
        await core.create_namespaced_pod_binding(
            "ours", "default", {"metadata": {"name": "ours"}, "target": {"kind": "Node", "name": "n1"}}
        )
        events = await collect(stream, 2)
    # the other scheduler's pod never shows; the bound pod leaves the selection as DELETED
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "ours-2"), ("DELETED", "ours")]
    bound = await core.list_namespaced_pod("default", field_selector="spec.nodeName!=")
    assert [p.metadata.name for p in bound.items] == ["ours"]


async def test_label_selectors(core: CoreApi) -> None:
    for name, labels in [("a", {"tier": "gpu", "team": "x"}), ("b", {"tier": "cpu"}), ("c", {})]:
        await core.create_namespaced_pod("default", pod_body(name, labels=labels))

    async def names(selector: str) -> list[str]:
        return sorted(
            p.metadata.name for p in (await core.list_namespaced_pod("default", label_selector=selector)).items
        )

    assert await names("tier=gpu") == ["a"]
    assert await names("tier!=gpu") == ["b", "c"]
    assert await names("tier in (gpu,cpu)") == ["a", "b"]
    assert await names("tier notin (gpu)") == ["b", "c"]
    assert await names("team") == ["a"]
    assert await names("!team") == ["b", "c"]
    assert await names("tier,team=x") == ["a"]


async def test_unsupported_field_label_is_400(core: CoreApi) -> None:
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_pod("default", field_selector="spec.priority=3")
    assert err.value.status == 400


async def test_bookmarks_carry_the_current_revision(core: CoreApi) -> None:
    pod = await core.create_namespaced_pod("default", pod_body("bm"))
    async with watch.Watch() as w:
        stream = w.stream(
            core.list_namespaced_pod,
            "default",
            resource_version=pod.metadata.resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=5,
        )
        events = await collect(stream, 1)
    assert events[0]["type"] == "BOOKMARK"
    assert events[0]["raw_object"]["metadata"]["resourceVersion"] == pod.metadata.resource_version
    assert w.resource_version == pod.metadata.resource_version


async def test_timeout_seconds_ends_the_stream(core: CoreApi) -> None:
    async with watch.Watch() as w:
        events = await asyncio.wait_for(
            _all(w.stream(core.list_namespaced_pod, "default", timeout_seconds=1)), timeout=5
        )
    assert events == []


async def _all(stream: watch.Watch) -> list[dict[str, Any]]:
    return [e async for e in stream]


async def test_namespace_watch_ignores_other_namespaces(core: CoreApi) -> None:
    listed = await core.list_namespaced_pod("here")
    async with watch.Watch() as w:
        stream = w.stream(
            core.list_namespaced_pod, "here", resource_version=listed.metadata.resource_version, timeout_seconds=5
        )
        await core.create_namespaced_pod("elsewhere", pod_body("x"))
        await core.create_namespaced_pod("here", pod_body("y"))
        events = await collect(stream, 1)
    assert events[0]["object"].metadata.name == "y"


async def test_stopping_the_server_ends_open_watches(kube_api: KubeApiServer, core: CoreApi) -> None:
    async with watch.Watch() as w:
        stream = w.stream(core.list_namespaced_pod, "default", timeout_seconds=30)
        await core.create_namespaced_pod("default", pod_body("z"))
        first = await collect(stream, 1)  # the watch is open and has delivered
        await asyncio.wait_for(kube_api.stop(), 5)
        rest = await asyncio.wait_for(_all(stream), 5)
    assert [e["object"].metadata.name for e in first] == ["z"]
    assert rest == []
