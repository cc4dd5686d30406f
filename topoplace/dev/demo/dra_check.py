"""What the demo's DRA claims got, read back from the API server: each claim pod's devices, and
whether any allocated claim in the namespace holds a tainted device (none may)."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client as k8s

from topoplace.dev.demo import dra_pool, report


def allocated_devices(claim: Any) -> tuple[str, ...]:
    """ "driver/pool/device" of every device a ResourceClaim's allocation names, sorted."""
    allocation = claim.status.allocation if claim.status is not None else None
    if allocation is None or allocation.devices is None:
        return ()
    results = allocation.devices.results or []
    return tuple(sorted(dra_pool.device_id(r.driver, r.pool, r.device) for r in results))


async def check_claims(
    api: k8s.ApiClient, namespace: str, seed: dra_pool.DraSeed, results: list[report.PodResult]
) -> report.DraSummary:
    """Fills each bound claim pod's `claim_devices`; counts every allocated claim of the namespace."""
    claims = await k8s.ResourceV1Api(api).list_namespaced_resource_claim(namespace)
    by_name = {c.metadata.name: allocated_devices(c) for c in claims.items}
    core = k8s.CoreV1Api(api)
    for result in results:
        if result.outcome != "bound":
            continue
        pod = await core.read_namespaced_pod(result.name, namespace)
        statuses = (pod.status.resource_claim_statuses if pod.status is not None else None) or []
        named = [s.resource_claim_name for s in statuses if s.resource_claim_name]
        named += [c.resource_claim_name for c in pod.spec.resource_claims or [] if c.resource_claim_name]
        result.claim_devices = tuple(sorted(d for name in named for d in by_name.get(name, ())))
    allocated = [devices for devices in by_name.values() if devices]
    given = {d for devices in allocated for d in devices}
    return report.DraSummary(
        claims_allocated=len(allocated),
        tainted=seed.tainted,
        tainted_allocated=tuple(sorted(given & set(seed.tainted))),
        shared=seed.shared,
        shared_holders=sum(1 for devices in allocated if set(devices) & set(seed.shared)),
    )
