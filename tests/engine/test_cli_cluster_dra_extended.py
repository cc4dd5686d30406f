"""`engine place --cluster`: a pod asking `nvidia.com/gpu` the old way, served by DRA (KEP-5004)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_cli_cluster import as_list, k8s_node, k8s_pod, run
from test_cli_cluster_dra import DRIVER, k8s_claim, k8s_slice

GPU = "nvidia.com/gpu"


def gpu_class(name: str = "gpu", extended: str | None = GPU) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}
    if extended is not None:
        spec["extendedResourceName"] = extended
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def asking_pod(gpus: int, resource: str = GPU, **spec: Any) -> dict[str, Any]:
    pod = k8s_pod("trainer", **spec)
    pod["spec"]["containers"][0]["resources"] = {"limits": {resource: str(gpus)}, "requests": {"cpu": "1"}}
    pod["status"] = {"phase": "Pending"}
    return pod


def test_a_pod_asking_gpus_the_old_way_gets_them_from_a_node_that_publishes_them_only_as_slices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = as_list(k8s_node("node-a"), k8s_slice("node-a", "gpu-0", "gpu-1", "gpu-2"), gpu_class())
    code, answer, _ = run(tmp_path, cluster, asking_pod(2), capsys=capsys)
    assert code == 0 and answer["node"] == "node-a"
    assert answer["claims"] == [
        {
            "namespace": "default",
            "name": None,
            "generateName": "trainer-extended-resources-",
            "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "container-0-request-1", "driver": DRIVER, "pool": "node-a", "device": "gpu-0"},
                        {"request": "container-0-request-1", "driver": DRIVER, "pool": "node-a", "device": "gpu-1"},
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}
                    ]
                },
            },
            # cpu sorts first among the container's requests: the GPUs are its request 1
            "requestMappings": [{"containerName": "main", "resourceName": GPU, "requestName": "container-0-request-1"}],
        }
    ]


def test_the_implicit_name_of_a_class_is_served_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = as_list(k8s_node("node-a"), k8s_slice("node-a", "gpu-0"), gpu_class("gpu", extended=None))
    code, answer, _ = run(tmp_path, cluster, asking_pod(1, "deviceclass.resource.kubernetes.io/gpu"), capsys=capsys)
    assert code == 0 and answer["node"] == "node-a"
    assert [r["device"] for r in answer["claims"][0]["allocation"]["devices"]["results"]] == ["gpu-0"]


def test_devices_other_claims_hold_are_not_given_and_kube_schedulers_reason_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    held = {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "node-a", "device": "gpu-0"}]}}
    cluster = as_list(
        k8s_node("node-a"), k8s_slice("node-a", "gpu-0", "gpu-1"), gpu_class(), k8s_claim("theirs", 1, held)
    )
    code, answer, _ = run(tmp_path, cluster, asking_pod(2), capsys=capsys)
    assert code == 1 and answer["node"] is None and answer["claims"] == []
    assert answer["nodes"] == [
        {"name": "node-a", "fits": False, "reasons": ["cannot allocate all claims"], "score": None}
    ]
    assert answer["reason"].startswith("0/1 nodes are available: 1 cannot allocate all claims.")


def test_a_node_whose_device_plugin_publishes_the_resource_is_served_by_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = as_list(
        k8s_node("node-a", **{GPU: "4"}), k8s_node("node-b"), k8s_slice("node-b", "gpu-0", "gpu-1"), gpu_class()
    )
    code, answer, _ = run(tmp_path, cluster, asking_pod(2), capsys=capsys)
    assert code == 0 and answer["node"] == "node-a" and "claims" not in answer  # the device plugin's GPUs
    full = as_list(
        k8s_node("node-a", **{GPU: "4"}),
        k8s_pod("busy", node="node-a", gpus=4),
        k8s_node("node-b"),
        k8s_slice("node-b", "gpu-0", "gpu-1"),
        gpu_class(),
    )
    code, answer, _ = run(tmp_path, full, asking_pod(2), capsys=capsys)
    assert code == 0 and answer["node"] == "node-b"  # node-a's are taken: DRA's on node-b
    assert answer["claims"][0]["requestMappings"][0]["requestName"] == "container-0-request-1"
    reasons = {n["name"]: n["reasons"] for n in answer["nodes"]}
    assert reasons["node-a"] == [f"Insufficient {GPU}"]


def test_without_a_class_or_with_the_gate_off_the_pod_does_not_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    no_class = as_list(k8s_node("node-a"), k8s_slice("node-a", "gpu-0", "gpu-1"))
    code, answer, _ = run(tmp_path, no_class, asking_pod(2), capsys=capsys)
    assert code == 1 and answer["node"] is None and "claims" not in answer
    cluster = as_list(k8s_node("node-a"), k8s_slice("node-a", "gpu-0", "gpu-1"), gpu_class())
    code, answer, _ = run(
        tmp_path, cluster, asking_pod(2), "--feature-gates", "DRAExtendedResource=false", capsys=capsys
    )
    assert code == 1 and answer["node"] is None
