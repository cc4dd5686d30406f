"""The chaos checker's input: the API server's objects, read over plain HTTP through its injected faults."""

from __future__ import annotations

import asyncio

import aiohttp

from topoplace.dev.chaos.checker import ClusterObjects, Obj

PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/podgroups"
RESOURCE_SLICES = "/apis/resource.k8s.io/v1/resourceslices"


async def read_cluster(base_url: str, *, attempts: int = 50) -> ClusterObjects:
    """Pods, nodes and PodGroups from the API server, each list retried through injected faults."""
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        pods = await _list(session, f"{base_url}/api/v1/pods", attempts)
        nodes = await _list(session, f"{base_url}/api/v1/nodes", attempts)
        podgroups = await _list(session, f"{base_url}{PODGROUPS}", attempts)
        slices = await _list(session, f"{base_url}{RESOURCE_SLICES}", attempts)
        events = await _list(session, f"{base_url}/api/v1/events", attempts)
    return ClusterObjects(
        pods=tuple(pods), nodes=tuple(nodes), podgroups=tuple(podgroups), slices=tuple(slices), events=tuple(events)
    )


async def _list(session: aiohttp.ClientSession, url: str, attempts: int) -> list[Obj]:
    last = ""
    for _ in range(attempts):
        try:
            async with session.get(url) as response:
                if response.status == 200:
                    items: list[Obj] = (await response.json()).get("items") or []
                    return items
                last = f"HTTP {response.status}"
        except (aiohttp.ClientError, TimeoutError) as exc:
            last = f"{type(exc).__name__}: {exc}"
        await asyncio.sleep(0.05)  # an injected fault; the next try draws again
    raise RuntimeError(f"could not list {url} after {attempts} tries: {last}")
