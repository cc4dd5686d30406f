"""The admission policies of deploy/kubernetes, evaluated as the API server would (CEL, with cel-python).

Finding 3 and 11: a tenant must not set, change or remove topoplace.io/ (and on HAMi's
clusters hami.io/) pod annotations; the binder may change nothing on a Node but HAMi's lock.
The expressions use standard CEL only (no Kubernetes extension), so cel-python's
evaluation is the API server's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import celpy
import deploy_manifests as manifests
import pytest

BINDER = "system:serviceaccount:topoplace:topoplace-binder"
TENANT = "alice@example.com"
REPLICASET_CONTROLLER = "system:serviceaccount:kube-system:replicaset-controller"
HAMI_DEVICE_PLUGIN = "system:serviceaccount:kube-system:hami-device-plugin"
OBJECTS = manifests.render(components=("hami",))
_ENV = celpy.Environment()


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    message: str = ""


def policy(name: str) -> dict[str, Any]:
    (found,) = [o for o in OBJECTS if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == name]
    return found


def _true(expression: str, activation: dict[str, Any]) -> bool:
    program = _ENV.program(_ENV.compile(expression))
    return bool(program.evaluate({k: celpy.json_to_cel(v) for k, v in activation.items()}))


def admit(name: str, operation: str, user: str, new: dict[str, Any] | None, old: dict[str, Any] | None,
          resource: str = "pods", sub_resource: str = "") -> Verdict:  # fmt: skip
    """The policy's verdict on one request, as the API server reaches it (rules, then conditions, then validations)."""
    spec = policy(name)["spec"]
    full = f"{resource}/{sub_resource}" if sub_resource else resource
    matched = any(
        operation in rule["operations"] and full in rule["resources"]
        for rule in spec["matchConstraints"]["resourceRules"]
    )
    if not matched:
        return Verdict(True, "not matched")
    request = {"operation": operation, "userInfo": {"username": user}, "subResource": sub_resource}
    activation = {"object": new, "oldObject": old, "request": request}
    if not all(_true(c["expression"], activation) for c in spec.get("matchConditions", [])):
        return Verdict(True, "not matched")
    for validation in spec["validations"]:
        if not _true(validation["expression"], activation):
            return Verdict(False, validation["message"])
    return Verdict(True)


def pod(**annotations: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "train-0", "namespace": "team-a"}
    if annotations:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": {"schedulerName": "topoplace"}}


BOUND = {"topoplace.io/node": "gpu-1", "topoplace.io/devices": '[{"index":0}]', "team": "a"}


def with_annotations(annotations: dict[str, str]) -> dict[str, Any]:
    return pod(**annotations)


def test_every_policy_is_bound_to_deny() -> None:
    policies = {o["metadata"]["name"] for o in OBJECTS if o["kind"] == "ValidatingAdmissionPolicy"}
    bindings = {
        o["spec"]["policyName"]: o["spec"]["validationActions"]
        for o in OBJECTS
        if o["kind"] == "ValidatingAdmissionPolicyBinding"
    }
    assert policies == set(bindings) == {
        "topoplace-pod-annotations", "topoplace-binder-node-lock-only", "topoplace-hami-pod-annotations",
    }  # fmt: skip
    assert all(actions == ["Deny"] for actions in bindings.values())
    assert all(policy(name)["spec"]["failurePolicy"] == "Fail" for name in policies)
    base = {o["metadata"]["name"] for o in manifests.render() if o["kind"] == "ValidatingAdmissionPolicy"}
    assert base == {"topoplace-pod-annotations", "topoplace-binder-node-lock-only"}


# --- topoplace.io/ on pods ----------------------------------------------------------------------------


@pytest.mark.parametrize("user", [TENANT, REPLICASET_CONTROLLER])
def test_a_pod_cannot_be_created_with_a_topoplace_annotation(user: str) -> None:
    # Finding 3: a pod with spec.nodeName and topoplace.io/devices squatted on a node's GPUs.
    forged = with_annotations({"topoplace.io/devices": '[{"index":0},{"index":1}]'})
    assert admit("topoplace-pod-annotations", "CREATE", user, forged, None) == Verdict(
        False, "only topoplace's binder may set or change topoplace.io/ annotations"
    )
    assert admit("topoplace-pod-annotations", "CREATE", user, with_annotations({"team": "a"}), None).allowed
    assert admit("topoplace-pod-annotations", "CREATE", user, pod(), None).allowed


@pytest.mark.parametrize(
    "after",
    [
        {**BOUND, "topoplace.io/devices": '[{"index":1}]'},  # changed: frees device 0 in the placer
        {k: v for k, v in BOUND.items() if k != "topoplace.io/devices"},  # removed
        {**BOUND, "topoplace.io/decision-id": "forged"},  # added
        {"team": "a"},  # all removed
    ],
)
def test_a_tenant_cannot_change_add_or_remove_a_topoplace_annotation_after_bind(after: dict[str, str]) -> None:
    verdict = admit("topoplace-pod-annotations", "UPDATE", TENANT, with_annotations(after), with_annotations(BOUND))
    assert not verdict.allowed and "topoplace.io/" in verdict.message


def test_a_tenant_may_edit_its_own_annotations_beside_topoplaces() -> None:
    after = {**BOUND, "team": "b", "owner": "alice"}
    assert admit(
        "topoplace-pod-annotations", "UPDATE", TENANT, with_annotations(after), with_annotations(BOUND)
    ).allowed
    assert admit("topoplace-pod-annotations", "UPDATE", TENANT, pod(), pod()).allowed


def test_only_the_binder_may_bind_with_topoplace_annotations() -> None:
    binding = {"metadata": {"name": "train-0", "annotations": {"topoplace.io/node": "gpu-1"}}, "target": {}}
    tenant = admit("topoplace-pod-annotations", "CREATE", TENANT, binding, None, sub_resource="binding")
    assert not tenant.allowed
    assert admit("topoplace-pod-annotations", "CREATE", BINDER, binding, None, sub_resource="binding").allowed
    assert admit("topoplace-pod-annotations", "UPDATE", BINDER, with_annotations(BOUND), pod()).allowed


# --- the binder on Nodes --------------------------------------------------------------------------------

NODE = {
    "metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.present": "true"},
                 "annotations": {"hami.io/node-nvidia-register": "GPU-0,..."}},
    "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
}  # fmt: skip


def node_with(**changes: Any) -> dict[str, Any]:
    metadata = {**NODE["metadata"], **changes.pop("metadata", {})}
    return {**NODE, "metadata": metadata, **changes}


def test_the_binder_may_take_and_release_hamis_node_lock() -> None:
    locked = node_with(metadata={"annotations": {**NODE["metadata"]["annotations"], "hami.io/mutex.lock": "x"}})
    assert admit("topoplace-binder-node-lock-only", "UPDATE", BINDER, locked, NODE, resource="nodes").allowed
    assert admit("topoplace-binder-node-lock-only", "UPDATE", BINDER, NODE, locked, resource="nodes").allowed


@pytest.mark.parametrize(
    "changed",
    [
        node_with(spec={}),  # the taint removed: the control plane opened to every pod
        node_with(spec={"unschedulable": True, **NODE["spec"]}),
        node_with(metadata={"labels": {"nvidia.com/gpu.present": "true", "tier": "gold"}}),
        node_with(metadata={"annotations": {}}),  # HAMi's registration removed
        node_with(metadata={"annotations": {**NODE["metadata"]["annotations"], "other": "x"}}),
        node_with(metadata={"finalizers": ["example.com/keep"]}),
    ],
)
def test_the_binder_may_change_nothing_else_on_a_node(changed: dict[str, Any]) -> None:
    verdict = admit("topoplace-binder-node-lock-only", "UPDATE", BINDER, changed, NODE, resource="nodes")
    assert not verdict.allowed


def test_the_node_policy_concerns_the_binder_only() -> None:
    assert admit("topoplace-binder-node-lock-only", "UPDATE", TENANT, node_with(spec={}), NODE, resource="nodes") == (
        Verdict(True, "not matched")
    )


# --- hami.io/ on pods (components/hami) ------------------------------------------------------------------


def test_with_hami_a_tenant_cannot_name_its_own_devices_but_keeps_hamis_scheduling_hints() -> None:
    forged = with_annotations(
        {"hami.io/vgpu-devices-allocated": "GPU-0,NVIDIA,0,0:;", "hami.io/bind-phase": "allocating"}
    )
    verdict = admit("topoplace-hami-pod-annotations", "CREATE", TENANT, forged, None)
    assert not verdict.allowed and "hami.io/" in verdict.message
    hints = with_annotations({"hami.io/gpu-scheduler-policy": "spread", "hami.io/node-scheduler-policy": "binpack"})
    assert admit("topoplace-hami-pod-annotations", "CREATE", TENANT, hints, None).allowed
    removed = admit("topoplace-hami-pod-annotations", "UPDATE", TENANT, pod(), forged)
    assert not removed.allowed


def test_with_hami_the_binder_and_hamis_device_plugin_write_hamis_annotations() -> None:
    allocating = with_annotations({"hami.io/bind-phase": "allocating"})
    done = with_annotations({"hami.io/bind-phase": "success"})
    assert admit("topoplace-hami-pod-annotations", "UPDATE", HAMI_DEVICE_PLUGIN, done, allocating).allowed
    assert admit("topoplace-hami-pod-annotations", "CREATE", BINDER, allocating, None, sub_resource="binding").allowed
    assert not admit("topoplace-hami-pod-annotations", "UPDATE", TENANT, done, allocating).allowed
