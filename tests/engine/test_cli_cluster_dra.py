"""`engine place --cluster`: a pod's ResourceClaims allocated as Kubernetes JSON, or kube-scheduler's reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_cli_cluster import as_list, k8s_node, k8s_pod, run

DRIVER = "gpu.example.com"

NOT_HELPFUL = "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."


def k8s_slice(node: str, *devices: str, **device_extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": d, **device_extra} for d in devices],
        },
    }


def k8s_class(name: str = "gpu") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {
            "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
            "config": [{"opaque": {"driver": DRIVER, "parameters": {"kind": "GpuConfig", "sharing": "TimeSlicing"}}}],
        },
    }


def k8s_claim(name: str, count: int = 1, allocation: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": count}}]}},
    }
    if allocation is not None:
        body["status"] = {"allocation": allocation}
    return body


def taken(node: str, device: str) -> dict[str, Any]:
    """status.allocation as kube-scheduler writes it for another pod."""
    return {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": node, "device": device}]}}


def claiming_pod(*entries: dict[str, str], status: list[dict[str, str]] | None = None) -> dict[str, Any]:
    pod = k8s_pod("trainer", resourceClaims=list(entries))
    pod["status"] = {"phase": "Pending", "resourceClaimStatuses": status or []}
    return pod


def test_the_claim_is_allocated_on_the_chosen_node_as_kubernetes_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = as_list(k8s_node("node-a"), k8s_slice("node-a", "gpu-0", "gpu-1"), k8s_class(), k8s_claim("train", 2))
    code, answer, _ = run(
        tmp_path, cluster, claiming_pod({"name": "gpus", "resourceClaimName": "train"}), capsys=capsys
    )
    assert code == 0 and answer["node"] == "node-a"
    assert answer["claims"] == [
        {
            "namespace": "default",
            "name": "train",
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": DRIVER, "pool": "node-a", "device": "gpu-0"},
                        {"request": "gpu", "driver": DRIVER, "pool": "node-a", "device": "gpu-1"},
                    ],
                    "config": [
                        {
                            "source": "FromClass",
                            "opaque": {"driver": DRIVER, "parameters": {"kind": "GpuConfig", "sharing": "TimeSlicing"}},
                        }
                    ],
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}
                    ]
                },
            },
        }
    ]


def test_devices_allocated_by_others_count_and_the_next_node_is_taken(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """node-a's one GPU is held by kube-scheduler's claim for another pod: node-b gets the pod."""
    cluster = as_list(
        k8s_node("node-a"),
        k8s_node("node-b"),
        k8s_slice("node-a", "gpu-0"),
        k8s_slice("node-b", "gpu-0"),
        k8s_class(),
        k8s_claim("other", allocation=taken("node-a", "gpu-0")),
        k8s_claim("train"),
    )
    code, answer, _ = run(
        tmp_path, cluster, claiming_pod({"name": "gpus", "resourceClaimName": "train"}), capsys=capsys
    )
    assert code == 0 and answer["node"] == "node-b"
    assert answer["claims"][0]["allocation"]["devices"]["results"][0]["pool"] == "node-b"


def test_no_node_holds_the_claims_kube_schedulers_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = as_list(k8s_node("node-a"), k8s_slice("node-a", "gpu-0"), k8s_class(), k8s_claim("train", 2))
    code, answer, _ = run(
        tmp_path, cluster, claiming_pod({"name": "gpus", "resourceClaimName": "train"}), capsys=capsys
    )
    assert code == 1 and answer["node"] is None
    assert answer["reason"] == f"cannot allocate all claims {NOT_HELPFUL}" and answer["claims"] == []
    assert {n["name"]: n["reasons"] for n in answer["nodes"]} == {"node-a": ["cannot allocate all claims"]}


def test_a_tainted_device_is_not_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    taint = [{"key": "gpu.example.com/unhealthy", "value": "xid-79", "effect": "NoSchedule"}]
    cluster = as_list(k8s_node("node-a"), k8s_slice("node-a", "gpu-0", taints=taint), k8s_class(), k8s_claim("train"))
    code, answer, _ = run(
        tmp_path, cluster, claiming_pod({"name": "gpus", "resourceClaimName": "train"}), capsys=capsys
    )
    assert code == 1 and answer["reason"] == f"cannot allocate all claims {NOT_HELPFUL}"


@pytest.mark.parametrize(
    ("entry", "status", "reason"),
    [
        (
            {"name": "gpus", "resourceClaimTemplateName": "t"},
            [],
            'pod "default/trainer": ResourceClaim not created yet',
        ),
        ({"name": "gpus", "resourceClaimName": "missing"}, [], 'resourceclaim.resource.k8s.io "missing" not found'),
        (
            {"name": "gpus", "resourceClaimTemplateName": "t"},
            [{"name": "gpus", "resourceClaimName": "missing"}],
            'resourceclaim.resource.k8s.io "missing" not found',
        ),
    ],
)
def test_a_claim_not_there_has_kube_schedulers_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], entry: dict[str, str], status: list[dict[str, str]], reason: str
) -> None:
    cluster = as_list(k8s_node("node-a"), k8s_slice("node-a", "gpu-0"), k8s_class())
    code, answer, _ = run(tmp_path, cluster, claiming_pod(entry, status=status), capsys=capsys)
    # kube's DynamicResources filter is unresolvable: preemption says it cannot help
    assert code == 1 and answer["node"] is None and answer["reason"] == f"{reason} {NOT_HELPFUL}"


def test_a_claim_allocated_already_keeps_its_allocation_and_its_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    on_b = taken("node-b", "gpu-0") | {
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-b"]}]}]
        }
    }
    cluster = as_list(
        k8s_node("node-a"),
        k8s_node("node-b"),
        k8s_slice("node-a", "gpu-0"),
        k8s_slice("node-b", "gpu-0"),
        k8s_class(),
        k8s_claim("train", allocation=on_b),
    )
    code, answer, _ = run(
        tmp_path, cluster, claiming_pod({"name": "gpus", "resourceClaimName": "train"}), capsys=capsys
    )
    assert code == 0 and answer["node"] == "node-b"
    assert answer["claims"][0]["allocation"] == on_b


def test_a_missing_device_class_is_bad_input_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = as_list(k8s_node("node-a"), k8s_slice("node-a", "gpu-0"), k8s_claim("train"))
    code, answer, err = run(
        tmp_path, cluster, claiming_pod({"name": "gpus", "resourceClaimName": "train"}), capsys=capsys
    )
    assert code == 2 and answer is None
    assert "claim default/train, request gpu: could not retrieve device class gpu" in err


def test_a_dra_feature_gate_switches_the_allocator(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """DRADeviceTaints=false: a tainted device is allocated, as Kubernetes does with the gate off."""
    taint = [{"key": "gpu.example.com/unhealthy", "value": "xid-79", "effect": "NoSchedule"}]
    cluster = as_list(k8s_node("node-a"), k8s_slice("node-a", "gpu-0", taints=taint), k8s_class(), k8s_claim("train"))
    pod = claiming_pod({"name": "gpus", "resourceClaimName": "train"})
    code, answer, err = run(tmp_path, cluster, pod, "--feature-gates", "DRADeviceTaints=false", capsys=capsys)
    assert code == 0 and answer["node"] == "node-a"
    assert "DRADeviceTaints" not in err  # read, so not noted as unused


def test_a_device_taint_rule_keeps_its_device_from_claims(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    drain = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "drain-node-a"},
        "spec": {"deviceSelector": {"pool": "node-a"}, "taint": {"key": "maintenance", "effect": "NoExecute"}},
    }
    cluster = as_list(
        k8s_node("node-a"),
        k8s_node("node-b"),
        k8s_slice("node-a", "gpu-0"),
        k8s_slice("node-b", "gpu-0"),
        k8s_class(),
        k8s_claim("train"),
        drain,
    )
    code, answer, err = run(
        tmp_path, cluster, claiming_pod({"name": "gpus", "resourceClaimName": "train"}), capsys=capsys
    )
    assert code == 0 and answer["node"] == "node-b"
    assert "DeviceTaintRule" not in err  # read, not noted as unused


def network_slice(bound: bool) -> dict[str, Any]:
    """One network-attached GPU reachable from every node; `bindsToNode` as the driver publishes it."""
    body = k8s_slice("fabric", "gpu-0", bindsToNode=bound)
    del body["spec"]["nodeName"]
    body["spec"]["allNodes"] = True
    return body


@pytest.mark.parametrize(
    ("bound", "gates", "selector"),
    [
        (
            True,
            (),
            {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-b"]}]}
                ]
            },
        ),
        (False, (), None),
        (True, ("--feature-gates", "DRADeviceBindingConditions=false"), None),
    ],
    ids=["bindsToNode", "plain", "gate-off"],
)
def test_binds_to_node_keeps_a_network_attached_device_on_the_chosen_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bound: bool, gates: tuple[str, ...], selector: Any
) -> None:
    """KEP-5007: the scheduler sets status.allocation.nodeSelector to the node the allocation was made for."""
    cluster = as_list(k8s_node("node-b"), network_slice(bound), k8s_class(), k8s_claim("train"))
    pod = claiming_pod({"name": "gpus", "resourceClaimName": "train"})
    code, answer, err = run(tmp_path, cluster, pod, *gates, capsys=capsys)
    assert code == 0 and answer["node"] == "node-b", err
    (placed,) = answer["claims"]
    assert placed["allocation"].get("nodeSelector") == selector
    assert placed["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    assert "DRADeviceBindingConditions" not in err  # read, so not noted as unused
