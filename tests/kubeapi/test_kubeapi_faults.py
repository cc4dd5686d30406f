"""Fault injection: each kind reaches a kubernetes-asyncio client as it would from a real server."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import aiohttp
import pytest
from kube_clients import client_for
from kubeapi_support import CoreApi, pod_body, status_of
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from topoplace.dev.kubeapi import KubeApiServer
from topoplace.dev.kubeapi.faults import FaultInjector, FaultPlan


@contextlib.asynccontextmanager
async def _core_against(plan: FaultPlan) -> AsyncIterator[tuple[KubeApiServer, CoreApi]]:
    async with KubeApiServer(faults=plan) as server:
        api = client_for(server.url)
        try:
            yield server, client.CoreV1Api(api)
        finally:
            await api.close()


@pytest.mark.parametrize(
    ("kind", "reason"), [("429", "TooManyRequests"), ("500", "InternalError"), ("503", "ServiceUnavailable")]
)
async def test_status_faults_are_api_exceptions(kind: str, reason: str) -> None:
    async with _core_against(FaultPlan(rate=1.0, kinds=(kind,), retry_after_seconds=3)) as (server, core):
        with pytest.raises(ApiException) as err:
            await core.list_namespaced_pod("default")
        assert err.value.status == int(kind)
        assert status_of(err.value)["reason"] == reason
        if kind == "429":
            assert err.value.headers is not None and err.value.headers["Retry-After"] == "3"
        assert server.fault_report().injected[kind] == 1


async def test_timeout_hangs_until_the_client_gives_up() -> None:
    async with _core_against(FaultPlan(rate=1.0, kinds=("timeout",))) as (server, core):
        with pytest.raises(asyncio.TimeoutError):
            await core.read_namespaced_pod("x", "default", _request_timeout=0.3)
        assert server.fault_report().injected["timeout"] == 1


async def test_reset_drops_the_connection_unanswered() -> None:
    async with _core_against(FaultPlan(rate=1.0, kinds=("reset",))) as (server, core):
        with pytest.raises(aiohttp.ClientConnectionError):
            await core.create_namespaced_pod("default", pod_body("never"))
        assert server.store.list("pods")[0] == []  # nothing was applied


async def test_lost_applies_the_change_then_drops_the_reply() -> None:
    plan = FaultPlan(rate=1.0, kinds=("lost",), verbs=("create",))
    async with _core_against(plan) as (server, core):
        listed = await core.list_namespaced_pod("default")  # not a create: no fault
        with pytest.raises(aiohttp.ClientConnectionError):
            await core.create_namespaced_pod("default", pod_body("applied"))
        async with watch.Watch() as w:  # a watcher sees the change the client never heard of
            stream = w.stream(
                core.list_namespaced_pod,
                "default",
                resource_version=listed.metadata.resource_version,
                timeout_seconds=5,
            )
            event = await asyncio.wait_for(anext(aiter(stream)), 5)
        assert (event["type"], event["object"].metadata.name) == ("ADDED", "applied")
        assert (await core.read_namespaced_pod("applied", "default")).metadata.name == "applied"
        assert server.fault_report().injected["lost"] == 1


async def test_watch_establishment_fails_with_500() -> None:
    async with _core_against(FaultPlan(rate=1.0, kinds=("reset",), verbs=("watch",))) as (server, core):
        with pytest.raises(ApiException) as err:
            async with watch.Watch() as w:
                async for _ in w.stream(core.list_namespaced_pod, "default", timeout_seconds=1):
                    break
        assert err.value.status == 500


async def test_only_the_planned_verbs_fail() -> None:
    async with _core_against(FaultPlan(rate=1.0, kinds=("500",), verbs=("delete",))) as (server, core):
        await core.create_namespaced_pod("default", pod_body("p"))
        await core.read_namespaced_pod("p", "default")
        with pytest.raises(ApiException):
            await core.delete_namespaced_pod("p", "default")
        report = server.fault_report()
        assert (report.considered, report.total) == (1, 1)


async def test_draws_are_deterministic_for_a_seed_and_counted() -> None:
    plan = FaultPlan(rate=0.3, seed=7)
    verbs = ["get", "list", "create", "patch", "delete", "update"] * 50
    first, second = FaultInjector(plan), FaultInjector(plan)
    draws = [first.draw(v) for v in verbs]
    assert draws == [second.draw(v) for v in verbs]
    assert draws != [FaultInjector(FaultPlan(rate=0.3, seed=8)).draw(v) for v in verbs]
    report = first.report()
    assert report.considered == len(verbs)
    assert report.injected == {k: draws.count(k) for k in plan.kinds}
    assert 0 < report.total < len(verbs)


async def test_debug_endpoint_reports_the_counts() -> None:
    async with _core_against(FaultPlan(rate=1.0, kinds=("503",))) as (server, core):
        for _ in range(3):
            with pytest.raises(ApiException):
                await core.list_node()
        async with aiohttp.ClientSession() as http, http.get(f"{server.url}/debug/faults") as resp:
            body = json.loads(await resp.read())
        assert body["injected"]["503"] == 3 and body["considered"] == 3
        assert body["plan"]["rate"] == 1.0


@pytest.mark.parametrize("bad", [{"rate": 1.5}, {"kinds": ("404",)}, {"verbs": ("bind",)}, {"kinds": ()}], ids=str)
def test_a_bad_plan_names_the_field(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=f"fault {next(iter(bad))}"):
        FaultPlan(**bad)  # type: ignore[arg-type]
