"""Binding conditions (DRADeviceBindingConditions): the Binding waits until the devices are ready.

A device published with `bindingConditions` is ready for a pod only once its driver (or a
controller) reports each of them True in the claim's `status.devices[]` entry for that device;
any of its `bindingFailureConditions` True means it failed. As kube-scheduler's PreBind does, the
binder reads the allocated claims again until every device with conditions is ready (then the
Binding goes out), a failure condition is True, or BINDING_TIMEOUT_S passes (then the placement
FAILED with the reason, and the placer decides the pod again).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from schemas.dra import ClaimAllocation

BINDING_TIMEOUT_S = 600.0  # kube-scheduler's default (the DRA plugin's bindingTimeout)
POLL_S = (0.05, 2.0)  # first and longest wait between two reads

Object = dict[str, Any]
ReadClaim = Callable[[ClaimAllocation], Awaitable[Object | None]]


class ConditionsVerdict(msgspec.Struct, frozen=True, kw_only=True):
    ready: bool
    failure: str = ""  # why it failed ("": not failed)


def waits_for_conditions(claim: ClaimAllocation) -> bool:
    return claim.allocation is not None and any(r.binding_conditions for r in claim.allocation.devices.results)


def judge(claim: ClaimAllocation, current: Object) -> ConditionsVerdict:
    """Whether every device of the allocation with binding conditions is ready, or one failed."""
    assert claim.allocation is not None
    statuses = {
        (d.get("driver"), d.get("pool"), d.get("device")): {
            c.get("type"): c.get("status") for c in d.get("conditions") or [] if isinstance(c, dict)
        }
        for d in (current.get("status") or {}).get("devices") or []
        if isinstance(d, dict)
    }
    ready = True
    for r in claim.allocation.devices.results:
        conditions = statuses.get((r.driver, r.pool, r.device), {})
        failed = [c for c in r.binding_failure_conditions if conditions.get(c) == "True"]
        if failed:
            device = f"{r.driver}/{r.pool}/{r.device}"
            return ConditionsVerdict(
                ready=False,
                failure=f"ResourceClaim {claim.namespace}/{claim.name}: device {device}: "
                f"binding failure condition {failed[0]} is True",
            )
        ready = ready and all(conditions.get(c) == "True" for c in r.binding_conditions)
    return ConditionsVerdict(ready=ready)


async def await_binding_conditions(
    claims: tuple[ClaimAllocation, ...],
    read: ReadClaim,
    *,
    timeout: float = BINDING_TIMEOUT_S,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> str | None:
    """None once every claim's devices are ready; else why the placement failed."""
    waiting = [c for c in claims if waits_for_conditions(c)]
    deadline, pause = clock() + timeout, POLL_S[0]
    while waiting:
        still = []
        for claim in waiting:
            current = await read(claim)
            if current is None:
                return f"ResourceClaim {claim.namespace}/{claim.name} does not exist"
            verdict = judge(claim, current)
            if verdict.failure:
                return verdict.failure
            if not verdict.ready:
                still.append(claim)
        waiting = still
        if not waiting:
            break
        if clock() >= deadline:
            names = ", ".join(f"{c.namespace}/{c.name}" for c in waiting)
            return f"binding conditions of ResourceClaim {names} not met within {timeout:.0f} s"
        await sleep(pause)
        pause = min(pause * 2, POLL_S[1])
    return None
