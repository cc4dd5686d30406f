"""HAMi (`hami`): HAMi's pod annotations in the Binding, under HAMi's node lock.

HAMi's device plugin hands the container exactly the GPUs HAMi's annotations name
(services/binder/hami_devices.py; a Neuron pod's are HAMi's `awsneuron` ones, which the
Neuron device plugin reads), and finds "the" pod in phase allocating on its node: so one
pod per node is bound at a time, under `hami.io/mutex.lock` on the Node
(services/binder/hami_lock.py). A placement without devices has nothing for HAMi to enforce.
"""

from __future__ import annotations

import asyncio
import logging

from kubernetes_asyncio.client.exceptions import ApiException

from schemas.enforcement import Enforcement
from schemas.events import BindingOutcome, PlacementEvent
from services.binder.enforcers.base import BinderParts, Binding, Enforcer, NotBound
from services.binder.hami_devices import hami_annotations
from services.binder.hami_lock import NodeLocker
from services.binder.outcome import BindResult
from services.binder.raw_api import raw_call
from services.binder.retry import RetriesExhausted, RetryBudget

log = logging.getLogger(__name__)


class HamiEnforcer(Enforcer):
    def __init__(self, parts: BinderParts) -> None:
        self._parts = parts
        self._locker = NodeLocker(
            parts.core, raw_call, wall_clock=parts.wall_clock, request_timeout=parts.policy.request_timeout_seconds
        )
        self._releases: set[asyncio.Task[None]] = set()
        # One HAMi bind per node at a time in this process (HAMi's scheduler does the same):
        # our own placements then never meet each other's node lock mid-bind.
        self._node_mutexes: dict[str, asyncio.Lock] = {}  # by node name; as many as nodes

    def applies(self, placement: PlacementEvent) -> bool:
        return placement.enforcement is Enforcement.HAMI and bool(placement.devices)

    def binding_annotations(self, placement: PlacementEvent) -> dict[str, str] | NotBound:
        parts = self._parts
        annotations = hami_annotations(
            placement,
            parts.device_memory,
            parts.wall_clock(),
            device_uuid=parts.device_uuid,
            neuron_cores=parts.neuron_cores,
        )
        if isinstance(annotations, str):
            return NotBound(outcome=BindingOutcome.FAILED, reason=annotations)
        return annotations

    async def around_binding(
        self, placement: PlacementEvent, budget: RetryBudget, binding: Binding
    ) -> BindResult | NotBound:
        mutex = self._node_mutexes.setdefault(placement.node, asyncio.Lock())
        async with mutex:
            # The pods of one node queue here (a gang's members among them): a deadline that ran
            # while this one waited left it a single try once its turn came.
            budget.start_now()
            lock = await self._locker.acquire(placement.node, placement.namespace, placement.name, budget)
            if not lock.taken:
                return NotBound(outcome=BindingOutcome.CONFLICT, reason=lock.reason, retryable=True)
            try:
                result = await binding()
            except asyncio.CancelledError:  # released in the background, never held on
                self._release_later(placement, 0.0)
                raise
            except BaseException:
                # Before the next pod of this node takes the mutex: else it meets this lock and
                # every pod queued behind it is refused in turn.
                await self._release(placement, 0.0)
                raise
            # HAMi's device plugin releases the lock in Allocate. Without its plugin on the node,
            # or when this call bound nothing, nobody would: then it goes now, before the next
            # pod of this node; else after a while at most.
            if lock.hami_plugin and result.bound_now:
                self._release_later(placement, self._parts.lock_release_seconds)
            else:
                await self._release(placement, 0.0)
            return result

    async def drain(self) -> None:
        while self._releases:
            await asyncio.gather(*self._releases, return_exceptions=True)

    def _release_later(self, placement: PlacementEvent, wait: float) -> None:
        task = asyncio.create_task(self._release(placement, wait))
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    async def _release(self, placement: PlacementEvent, wait: float) -> None:
        if wait > 0:
            await self._parts.sleep(wait)
        try:
            await self._locker.release(placement.node, placement.namespace, placement.name, self._parts.new_budget())
        except (RetriesExhausted, ApiException) as exc:
            # HAMi's own timeout ends the lock then.
            log.warning("binder.hami_unlock_failed", extra={"fields": {"node": placement.node, "error": str(exc)}})
