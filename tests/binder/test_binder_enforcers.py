"""The enforcement paths' seam: the registry covers every path, and a path plugs into every binding.

The paths themselves (HAMi, DRA) are tested in test_binder_hami.py and test_binder_claims.py;
here a recording path, registered as a new one would be, shows what PodBinder does with a path's
hooks against the test API server.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from binder_support import FaultProxy, PodFactory, placement_for
from kubernetes_asyncio import client

from schemas.dra import ClaimAllocation, DeviceResult
from schemas.enforcement import Enforcement
from schemas.events import BindingOutcome, DeviceAssignment, PlacementEvent
from services.binder.apply import PodBinder
from services.binder.enforcers import ENFORCERS, EnforcerFactory, Enforcers
from services.binder.enforcers.base import ApiCall, BinderParts, Binding, Enforcer, NotBound
from services.binder.enforcers.dra import DraEnforcer
from services.binder.enforcers.hami import HamiEnforcer
from services.binder.enforcers.plain import PlainDevicePlugin
from services.binder.outcome import BindResult
from services.binder.retry import BackoffPolicy, RetryBudget
from topoplace.dev.kubeapi import KubeApiServer

NODE = "node-a"
POLICY = BackoffPolicy(base_seconds=0.001, cap_seconds=0.01, max_attempts=3, deadline_seconds=5.0)
CLAIM = ClaimAllocation(
    namespace="default",
    name="gpus",
    uid="claim-uid",
    results=(DeviceResult(request="gpu", driver="gpu.example.com", pool=NODE, device="gpu-0"),),
)


def parts(core: client.CoreV1Api) -> BinderParts:
    return BinderParts(
        core=core,
        policy=POLICY,
        sleep=_no_sleep,
        new_budget=lambda: RetryBudget(POLICY),
        wall_clock=lambda: 0.0,
        device_memory=lambda node, index: None,
        device_uuid=lambda node, index: None,
        lock_release_seconds=60.0,
        claims=None,
    )


async def _no_sleep(seconds: float) -> None:
    return None


# --- the registry -------------------------------------------------------------------------------


def test_every_enforcement_has_an_enforcer() -> None:
    # A new value in schemas/enforcement.py fails here until its line is in the registry.
    assert set(ENFORCERS) == set(Enforcement)


async def test_a_registry_without_a_path_refuses_to_start(core: client.CoreV1Api) -> None:
    without_hami: dict[Enforcement, EnforcerFactory] = {
        path: make for path, make in ENFORCERS.items() if path is not Enforcement.HAMI
    }
    with pytest.raises(ValueError, match="no enforcer for enforcement hami"):
        Enforcers(parts(core), without_hami)


@pytest.mark.parametrize(
    ("enforcement", "devices", "claims", "expected"),
    [
        (Enforcement.DEVICE_PLUGIN, True, False, [PlainDevicePlugin]),
        (Enforcement.HAMI, True, False, [HamiEnforcer]),
        (Enforcement.HAMI, False, False, []),  # nothing for HAMi to enforce: no lock, no annotations
        (Enforcement.DRA, False, True, [DraEnforcer]),
        (Enforcement.DRA, False, False, []),  # a dra node's pod without claims: the Binding alone
        (Enforcement.DEVICE_PLUGIN, False, True, [PlainDevicePlugin, DraEnforcer]),  # claims are the pod's
        (Enforcement.HAMI, True, True, [HamiEnforcer, DraEnforcer]),
    ],
)
async def test_the_paths_a_placement_takes(
    core: client.CoreV1Api,
    make_pod: PodFactory,
    enforcement: Enforcement,
    devices: bool,
    claims: bool,
    expected: list[type],
) -> None:
    placement = placement_for(
        make_pod(),
        NODE,
        (DeviceAssignment(index=0),) if devices else (),
        enforcement=enforcement,
        claims=(CLAIM,) if claims else (),
    )
    assert [type(e) for e in Enforcers(parts(core)).for_placement(placement)] == expected


# --- a path plugged in by one registry line -----------------------------------------------------


@dataclass
class Journal:
    """What the recording paths were asked, in order, and the Bindings sent at each step."""

    proxy: FaultProxy
    steps: list[str] = field(default_factory=list)

    def note(self, step: str) -> None:
        self.steps.append(f"{step} (bindings sent: {len(self.proxy.calls('POST', '/binding'))})")


@dataclass
class RecordingPath(Enforcer):
    """A path for device-plugin placements that records its hooks and can refuse at any of them."""

    name: str
    journal: Journal
    refuse_at: str = ""

    def applies(self, placement: PlacementEvent) -> bool:
        return placement.enforcement is Enforcement.DEVICE_PLUGIN

    def binding_annotations(self, placement: PlacementEvent) -> dict[str, str] | NotBound:
        self.journal.note(f"{self.name}: annotations")
        if self.refuse_at == "annotations":
            return NotBound(outcome=BindingOutcome.FAILED, reason=f"{self.name} cannot annotate")
        return {f"example.com/{self.name}": placement.node}

    async def around_binding(
        self, placement: PlacementEvent, budget: RetryBudget, binding: Binding
    ) -> BindResult | NotBound:
        self.journal.note(f"{self.name}: taken")
        if self.refuse_at == "around":
            return NotBound(outcome=BindingOutcome.CONFLICT, reason=f"{self.name} is held", retryable=True)
        result = await binding()
        self.journal.note(f"{self.name}: released, bound now {result.bound_now}")
        return result

    async def before_binding(self, placement: PlacementEvent, call: ApiCall) -> NotBound | None:
        self.journal.note(f"{self.name}: before")
        if self.refuse_at == "before":
            return NotBound(outcome=BindingOutcome.CONFLICT, reason=f"{self.name} is taken", retryable=True)
        return None


def recording(journal: Journal, name: str, refuse_at: str = "") -> EnforcerFactory:
    """The registry's line for a recording path: its factory."""

    def make(parts: BinderParts) -> Enforcer:
        return RecordingPath(name=name, journal=journal, refuse_at=refuse_at)

    return make


async def test_a_path_added_by_one_registry_line_takes_part_in_the_binding(
    core: client.CoreV1Api, kube_api: KubeApiServer, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    journal = Journal(proxy)
    binder = PodBinder(
        core,
        policy=POLICY,
        sleep=_no_sleep,
        enforcers={**ENFORCERS, Enforcement.DEVICE_PLUGIN: recording(journal, "first")},
    )
    pod = make_pod()
    result = await binder.bind(placement_for(pod, NODE))
    assert result.outcome is BindingOutcome.BOUND and result.bound_now
    assert journal.steps == [
        "first: annotations (bindings sent: 0)",
        "first: taken (bindings sent: 0)",
        "first: before (bindings sent: 0)",
        "first: released, bound now True (bindings sent: 1)",
    ]
    stored = kube_api.store.get("pods", pod["metadata"]["name"], "default")
    assert stored["spec"]["nodeName"] == NODE
    assert stored["metadata"]["annotations"]["example.com/first"] == NODE  # in the one Binding


async def test_paths_nest_in_the_registrys_order(
    core: client.CoreV1Api, proxy: FaultProxy, make_pod: PodFactory
) -> None:
    journal = Journal(proxy)
    # The second under HAMi's key: any line after the first, for placements both paths take.
    registry = {
        **ENFORCERS,
        Enforcement.DEVICE_PLUGIN: recording(journal, "first"),
        Enforcement.HAMI: recording(journal, "second"),
    }
    result = await PodBinder(core, policy=POLICY, sleep=_no_sleep, enforcers=registry).bind(
        placement_for(make_pod(), NODE)
    )
    assert result.outcome is BindingOutcome.BOUND
    assert [step.split(" (")[0] for step in journal.steps] == [
        "first: annotations",
        "second: annotations",
        "first: taken",
        "second: taken",
        "first: before",
        "second: before",
        "second: released, bound now True",
        "first: released, bound now True",
    ]


@pytest.mark.parametrize(
    ("refuse_at", "outcome", "reason", "retryable"),
    [
        ("annotations", BindingOutcome.FAILED, "first cannot annotate", False),
        ("around", BindingOutcome.CONFLICT, "first is held", True),
        ("before", BindingOutcome.CONFLICT, "first is taken", True),
    ],
)
async def test_a_path_that_refuses_leaves_the_pod_unbound(
    core: client.CoreV1Api,
    kube_api: KubeApiServer,
    proxy: FaultProxy,
    make_pod: PodFactory,
    refuse_at: str,
    outcome: BindingOutcome,
    reason: str,
    retryable: bool,
) -> None:
    journal = Journal(proxy)
    binder = PodBinder(
        core,
        policy=POLICY,
        sleep=_no_sleep,
        enforcers={**ENFORCERS, Enforcement.DEVICE_PLUGIN: recording(journal, "first", refuse_at)},
    )
    pod = make_pod()
    result = await binder.bind(placement_for(pod, NODE))
    assert (result.outcome, result.reason, result.retryable) == (outcome, reason, retryable)
    assert proxy.calls("POST", "/binding") == []
    assert not kube_api.store.get("pods", pod["metadata"]["name"], "default")["spec"].get("nodeName")
