"""The seam between the binder and an enforcement path: what each path adds to a pod's binding.

An enforcement path (schemas/enforcement.py) is what makes a node honour the placer's device
choice. `PodBinder` (services/binder/apply.py) binds every pod the same way: one Binding
carrying the device annotations and the seal. A path adds to that through four hooks, each
with a do-nothing default, called in this order:

1. `binding_annotations`: more annotations for the Binding (HAMi's), or why there can be none;
2. `around_binding`: held across the rest, e.g. a lock taken before and released after
   (HAMi's node lock, and its per-node turn in this process);
3. `before_binding`: written once the pod's standing is known, just before the Binding
   (DRA's claim allocations);
4. `drain`: waits for what it left running in the background (a delayed lock release).

`applies` says whether the path has work for a placement; every path that applies takes part.
kube-scheduler's VolumeBinding PreBind (services/binder/volume_binding.py) is an `Enforcer` too, one
every pod passes through first, whatever its path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec
from kubernetes_asyncio import client

from schemas.events import BindingOutcome, PlacementEvent
from services.binder.claims import ClaimWriter
from services.binder.neuron_cores import NeuronCoreNames, NoNeuronCores
from services.binder.outcome import BindResult
from services.binder.retry import BackoffPolicy, RetryBudget

# One API call (`operation`, the call made with `_preload_content=False`), retried within the pod's budget.
ApiCall = Callable[[str, Callable[[], Awaitable[Any]]], Awaitable[bytes]]
# The rest of the binding, as `around_binding` runs it.
Binding = Callable[[], Awaitable[BindResult]]


class NotBound(msgspec.Struct, frozen=True, kw_only=True):
    """Why a path stops the binding: the pod is not bound."""

    outcome: BindingOutcome
    reason: str
    retryable: bool = False  # only for a while (a lock another holds): worth another try
    condition: str = ""  # the PodScheduled=False reason the pod gets besides its Event ("": none)


@dataclass(frozen=True, kw_only=True)
class BinderParts:
    """What the binder hands every path's factory: its API client, clocks, retry policy and topology."""

    core: client.CoreV1Api
    policy: BackoffPolicy
    sleep: Callable[[float], Awaitable[None]]
    new_budget: Callable[[], RetryBudget]  # for work after the pod's own budget (a lock released later)
    wall_clock: Callable[[], float]
    device_memory: Callable[[str, int], int | None]  # a device's MiB from the node's topology
    device_uuid: Callable[[str, int], str | None]  # a device's UUID from the node's topology
    lock_release_seconds: float  # HAMi: when the binder removes a bound pod's node lock itself
    claims: ClaimWriter | None  # DRA: the writer to use (with the binder's claim watch); None: a plain one
    neuron_cores: NeuronCoreNames = field(default_factory=NoNeuronCores)  # HAMi: which NeuronCores a pod gets


class Enforcer(Protocol):
    """One enforcement path's part in binding a pod (see the module's docstring for the order)."""

    def applies(self, placement: PlacementEvent) -> bool:
        """Whether this path has work for the placement."""
        ...

    def binding_annotations(self, placement: PlacementEvent) -> dict[str, str] | NotBound:
        """Annotations the Binding carries besides the device annotations and the seal."""
        return {}

    async def around_binding(
        self, placement: PlacementEvent, budget: RetryBudget, binding: Binding
    ) -> BindResult | NotBound:
        """Run `binding` (the rest of the pod's binding) under what this path holds meanwhile."""
        return await binding()

    async def before_binding(self, placement: PlacementEvent, call: ApiCall) -> NotBound | None:
        """Write what must stand before the pod has a node; None when all is written."""
        return None

    async def drain(self) -> None:
        """Wait for the work this path left running in the background (tests, shutdown)."""
        return None
