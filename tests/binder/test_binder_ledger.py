"""The device ledger: rebuilt from the topics, and its collision rules."""

from __future__ import annotations

import msgspec
import pytest
from decision_keys import TEST_KEY

from schemas import annotations as pod_annotations
from schemas import topics
from schemas.events import (
    DeviceAssignment,
    LifecyclePhase,
    NodeTopologyEvent,
    PlacementEvent,
    PlacementOutcome,
    PodLifecycleEvent,
)
from schemas.topology import Device, Vendor
from services.binder.apply import device_annotations
from services.binder.kube_objects import PodObject
from services.binder.ledger import DeviceLedger, Holding, LedgerNote
from services.binder.outcome import PodView

GPU_MIB = 16_000


def gpu(index: int, memory_mib: int = GPU_MIB, cores: int = 100) -> Device:
    return Device(index=index, uuid=f"GPU-{index}", vendor=Vendor.NVIDIA, model="T", memory_mib=memory_mib, cores=cores)


def whole(index: int) -> DeviceAssignment:
    return DeviceAssignment(index=index)


def share(index: int, memory_mib: int, cores: int = 100) -> DeviceAssignment:
    return DeviceAssignment(index=index, memory_mib=memory_mib, cores=cores)


def topology(node: str, *devices: Device) -> NodeTopologyEvent:
    return NodeTopologyEvent(node=node, machine_type="test", devices=devices)


def bound(uid: str, node: str, *devices: DeviceAssignment) -> PodLifecycleEvent:
    return PodLifecycleEvent(uid=uid, namespace="ns", name=uid, phase=LifecyclePhase.BOUND, node=node, devices=devices)


@pytest.fixture
def ledger() -> DeviceLedger:
    led = DeviceLedger()
    led.apply_message(topics.TOPOLOGY_NODES.name, "n1", topology("n1", gpu(0), gpu(1), gpu(2)))
    return led


def test_idle_devices_fit(ledger: DeviceLedger) -> None:
    assert ledger.collisions("p", "n1", (whole(0), whole(1))) == ()


def test_whole_device_held_by_another_pod_collides(ledger: DeviceLedger) -> None:
    ledger.apply_message(topics.PODS_LIFECYCLE.name, "a", bound("a", "n1", whole(1)))
    reasons = ledger.collisions("p", "n1", (whole(0), whole(1)))
    assert len(reasons) == 1
    assert "device 1 on node n1" in reasons[0] and "a" in reasons[0]


def test_whole_device_needs_an_idle_device_even_beside_a_small_share(ledger: DeviceLedger) -> None:
    ledger.hold(Holding(pod_uid="a", node="n1", devices=(share(0, 1000, 10),)))
    assert ledger.collisions("p", "n1", (whole(0),)) != ()


def test_share_cannot_join_a_whole_device(ledger: DeviceLedger) -> None:
    ledger.hold(Holding(pod_uid="a", node="n1", devices=(whole(0),)))
    assert ledger.collisions("p", "n1", (share(0, 1000, 10),)) != ()


def test_shares_fit_while_memory_and_cores_last(ledger: DeviceLedger) -> None:
    half = GPU_MIB // 2
    ledger.hold(Holding(pod_uid="a", node="n1", devices=(share(0, half, 50),)))
    assert ledger.collisions("p", "n1", (share(0, half, 50),)) == ()
    over_memory = ledger.collisions("p", "n1", (share(0, half + 1, 10),))
    assert len(over_memory) == 1 and "MiB" in over_memory[0]
    over_cores = ledger.collisions("p", "n1", (share(0, 1000, 51),))
    assert len(over_cores) == 1 and "cores" in over_cores[0]


def test_memory_only_share_fits_beside_shares_that_leave_cores(ledger: DeviceLedger) -> None:
    ledger.hold(Holding(pod_uid="a", node="n1", devices=(share(0, 4000, 60),)))
    assert ledger.collisions("p", "n1", (share(0, 4000, 0),)) == ()


def test_memory_only_share_needs_a_core_left(ledger: DeviceLedger) -> None:
    # The engine refuses a cores-0 share on a device whose cores are all taken ("all cores taken")
    ledger.hold(Holding(pod_uid="a", node="n1", devices=(share(0, 4000, 100),)))
    reasons = ledger.collisions("p", "n1", (share(0, 4000, 0),))
    assert len(reasons) == 1 and "cores" in reasons[0]


def test_memory_zero_means_all_memory(ledger: DeviceLedger) -> None:
    # A cores-only share (memory 0) takes the device's whole memory: nothing else fits beside it.
    ledger.hold(Holding(pod_uid="a", node="n1", devices=(DeviceAssignment(index=2, memory_mib=0, cores=30),)))
    assert ledger.collisions("p", "n1", (share(2, 100, 10),)) != ()


def test_capacity_comes_from_the_topology(ledger: DeviceLedger) -> None:
    ledger.apply_message(topics.TOPOLOGY_NODES.name, "n2", topology("n2", gpu(0, memory_mib=4000)))
    ledger.hold(Holding(pod_uid="a", node="n2", devices=(share(0, 3000, 10),)))
    assert ledger.collisions("p", "n2", (share(0, 1000, 10),)) == ()
    assert ledger.collisions("p", "n2", (share(0, 1001, 10),)) != ()


def test_unknown_device_on_a_known_node_collides(ledger: DeviceLedger) -> None:
    reasons = ledger.collisions("p", "n1", (whole(7),))
    assert reasons == ("node n1 has no device 7",)


def test_device_listed_twice_collides(ledger: DeviceLedger) -> None:
    assert len(ledger.collisions("p", "n1", (share(0, 10, 10), share(0, 10, 10)))) == 1


def test_unknown_node_still_guards_whole_devices() -> None:
    led = DeviceLedger()
    led.hold(Holding(pod_uid="a", node="nx", devices=(whole(0),)))
    assert led.collisions("p", "nx", (whole(0),)) != ()
    assert led.collisions("p", "nx", (whole(1),)) == ()
    led.hold(Holding(pod_uid="b", node="nx", devices=(share(1, 1000, 60),)))
    assert led.collisions("p", "nx", (share(1, 1000, 40),)) == ()
    assert led.collisions("p", "nx", (share(1, 1000, 41),)) != ()


def test_pod_holding_exactly_these_devices_is_not_a_collision(ledger: DeviceLedger) -> None:
    devices = (whole(0), whole(1))
    ledger.hold(Holding(pod_uid="p", node="n1", devices=devices))
    assert ledger.collisions("p", "n1", devices) == ()
    assert ledger.collisions("other", "n1", (whole(0),)) != ()


def test_deleted_pod_frees_its_devices(ledger: DeviceLedger) -> None:
    ledger.apply_message(topics.PODS_LIFECYCLE.name, "a", bound("a", "n1", whole(0)))
    deleted = PodLifecycleEvent(uid="a", namespace="ns", name="a", phase=LifecyclePhase.DELETED)
    ledger.apply_message(topics.PODS_LIFECYCLE.name, "a", deleted)
    assert ledger.collisions("p", "n1", (whole(0),)) == ()
    assert ledger.holding("a") is None


def test_tombstone_frees_the_pod_and_forgets_the_node(ledger: DeviceLedger) -> None:
    ledger.apply_message(topics.PODS_LIFECYCLE.name, "a", bound("a", "n1", whole(0)))
    ledger.apply_message(topics.PODS_LIFECYCLE.name, "a", None)
    assert ledger.holders("n1", 0) == {}
    ledger.apply_message(topics.TOPOLOGY_NODES.name, "n1", None)
    assert not ledger.knows_node("n1")


def test_a_bound_pod_reported_with_other_devices_keeps_the_devices_it_was_bound_with(ledger: DeviceLedger) -> None:
    # An edited annotation (or a forged report) must not free a device the pod still uses.
    assert ledger.apply_message(topics.PODS_LIFECYCLE.name, "a", bound("a", "n1", whole(0))) is None
    note = ledger.apply_message(topics.PODS_LIFECYCLE.name, "a", bound("a", "n1", whole(1)))
    assert note is LedgerNote.EDIT_IGNORED
    assert set(ledger.holders("n1", 0)) == {"a"}
    assert ledger.holders("n1", 1) == {}
    assert ledger.collisions("p", "n1", (whole(0),)) != ()


def test_a_hold_before_binding_stays_beside_the_devices_bound_until_it_settles() -> None:
    led = DeviceLedger()
    ticket = led.hold(Holding(pod_uid="a", node="n1", devices=(whole(3),)))  # a placement in flight, not bound
    led.apply_message(topics.PODS_LIFECYCLE.name, "a", bound("a", "n1", whole(1)))
    assert set(led.holders("n1", 1)) == {"a"} and set(led.holders("n1", 3)) == {"a"}
    led.restore(ticket)  # its bind finds the pod bound with other devices
    assert set(led.holders("n1", 1)) == {"a"} and led.holders("n1", 3) == {}


def test_a_deleted_report_frees_devices_only_when_the_api_server_agrees() -> None:
    present = {"a"}
    led = DeviceLedger(pod_gone=lambda uid: uid not in present)
    led.apply_message(topics.PODS_LIFECYCLE.name, "a", bound("a", "n1", whole(0)))
    deleted = PodLifecycleEvent(uid="a", namespace="ns", name="a", phase=LifecyclePhase.DELETED)
    assert led.apply_message(topics.PODS_LIFECYCLE.name, "a", deleted) is LedgerNote.DELETE_REFUSED
    assert led.apply_message(topics.PODS_LIFECYCLE.name, "a", None) is LedgerNote.DELETE_REFUSED
    assert set(led.holders("n1", 0)) == {"a"}
    present.clear()
    assert led.apply_message(topics.PODS_LIFECYCLE.name, "a", deleted) is None
    assert led.holding("a") is None


def api_pod(uid: str, node: str = "", annotations: dict[str, str] | None = None, phase: str = "") -> PodView:
    """A pod as the API server sends it, through the binder's own decoder and the test key."""
    body = {
        "metadata": {"uid": uid, "name": uid, "namespace": "ns", "annotations": annotations or {}},
        "spec": {"nodeName": node or None, "containers": [{"name": "c"}]},
        "status": {"phase": phase},
    }
    return msgspec.json.decode(msgspec.json.encode(body), type=PodObject).view(TEST_KEY)


def sealed(uid: str, node: str, *devices: DeviceAssignment) -> dict[str, str]:
    """The annotations the binder's Binding writes."""
    return device_annotations(
        PlacementEvent(
            decision_id="d-1",
            uid=uid,
            namespace="ns",
            name=uid,
            pod_resource_version="1",
            outcome=PlacementOutcome.PLACED,
            node=node,
            devices=devices,
        ),
        TEST_KEY,
    )


def test_the_api_servers_pods_feed_the_ledger() -> None:
    led = DeviceLedger()
    notes = sealed("a", "n1", whole(2))
    assert led.apply_api_pod("a", api_pod("a", annotations=notes)) is None and led.holding("a") is None  # no node
    led.apply_api_pod("a", api_pod("a", "n1", notes))
    assert set(led.holders("n1", 2)) == {"a"}
    edited = notes | {pod_annotations.DEVICES: pod_annotations.encode_devices((whole(5),))}
    assert led.apply_api_pod("a", api_pod("a", "n1", edited)) is None  # the seal still says device 2
    assert set(led.holders("n1", 2)) == {"a"} and led.holders("n1", 5) == {}
    led.apply_api_pod("a", api_pod("a", "n1", notes, phase="Succeeded"))
    assert led.holding("a") is None  # a finished pod holds nothing
    led.apply_api_pod("b", api_pod("b", "n1", sealed("b", "n1", whole(1))))
    led.apply_api_pod("b", None)
    assert led.holding("b") is None


def test_a_squatting_pod_with_a_device_annotation_but_no_seal_holds_nothing() -> None:
    """A pod that asks for no GPU, sets spec.nodeName and topoplace.io/devices: 0..7 (issue 15, #3)."""
    led = DeviceLedger()
    squat = {pod_annotations.DEVICES: pod_annotations.encode_devices(tuple(whole(i) for i in range(8)))}
    view = api_pod("squatter", "n1", squat)
    assert view.devices is None and "without topoplace.io/seal" in view.seal_problem
    assert led.apply_api_pod("squatter", view) is None
    assert led.holding("squatter") is None
    assert all(led.holders("n1", i) == {} for i in range(8))
    # Another pod's seal copied over does not verify for this uid; a seal for another node does not count here.
    stolen = api_pod("squatter", "n1", sealed("victim", "n1", whole(0)))
    assert stolen.devices is None and "does not verify" in stolen.seal_problem
    moved = api_pod("a", "n2", sealed("a", "n1", whole(0)))
    assert moved.devices is None and "sealed for node 'n1'" in moved.seal_problem


def test_an_annotation_edited_after_the_bind_changes_nothing_even_for_a_fresh_ledger() -> None:
    """A restarted binder rebuilds its ledger from the pods: the seal, not the edited annotation, decides."""
    edited = sealed("a", "n1", whole(2)) | {pod_annotations.DEVICES: pod_annotations.encode_devices((whole(5),))}
    fresh = DeviceLedger()
    fresh.apply_api_pod("a", api_pod("a", "n1", edited))
    assert set(fresh.holders("n1", 2)) == {"a"} and fresh.holders("n1", 5) == {}


def test_restore_puts_back_what_a_failed_bind_replaced(ledger: DeviceLedger) -> None:
    before = Holding(pod_uid="a", node="n1", devices=(whole(0),))
    ledger.hold(before)
    ticket = ledger.hold(Holding(pod_uid="a", node="n1", devices=(whole(2),)))
    ledger.restore(ticket)
    assert ledger.holding("a") == before
    assert ledger.holders("n1", 2) == {}
    ledger.restore(ledger.hold(Holding(pod_uid="b", node="n1", devices=(whole(1),))))
    assert ledger.holding("b") is None and ledger.holders("n1", 1) == {}
