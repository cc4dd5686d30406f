"""`engine place --cluster` with a gang whose pods claim devices: each member's claims allocated on its
node (the single-pod answer's entries), a ComputeDomain's pods inside one NVLink clique, a claim the
cluster lacks answered with kube-scheduler's reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_cli_cluster import as_list, k8s_node, k8s_pod, run

from topoplace.cli import main

GPU_DRIVER = "gpu.example.com"
CHANNEL_DRIVER = "compute-domain.nvidia.com"


def k8s_slice(node: str, driver: str, *devices: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": d} for d in devices],
        },
    }


def k8s_class(name: str, driver: str) -> dict[str, Any]:
    selectors = [{"cel": {"expression": f'device.driver == "{driver}"'}}]
    meta = {"name": name}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": meta,
        "spec": {"selectors": selectors},
    }


def k8s_template(name: str, device_class: str, count: int) -> dict[str, Any]:
    request = {"name": "req", "exactly": {"deviceClassName": device_class, "count": count}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


COMPUTE_DOMAIN = {
    "apiVersion": "resource.nvidia.com/v1beta1",
    "kind": "ComputeDomain",
    "metadata": {"name": "imex", "namespace": "default"},
    "spec": {"numNodes": 3, "channel": {"resourceClaimTemplate": {"name": "imex-channel"}}},
}
GROUP = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "PodGroup",
    "metadata": {"name": "job", "namespace": "default"},
    "spec": {"minMember": 3},
}


def cluster(second_clique: int, *extra: dict[str, Any]) -> dict[str, Any]:
    """Clique c1: two nodes; clique c2: `second_clique` nodes; one node in none. Each: 2 GPUs, 1 channel."""
    names = [("node-a1", "c1"), ("node-a2", "c1"), *((f"node-b{i}", "c2") for i in range(second_clique))]
    nodes = [k8s_node(n, labels={"nvidia.com/gpu.clique": c}, pods="1") for n, c in names]
    nodes.append(k8s_node("node-x", pods="1"))
    objects: list[dict[str, Any]] = [*nodes, GROUP]
    for n in nodes:
        name = n["metadata"]["name"]
        objects += [k8s_slice(name, GPU_DRIVER, "gpu-0", "gpu-1"), k8s_slice(name, CHANNEL_DRIVER, "channel-0")]
    objects += [k8s_class("gpu", GPU_DRIVER), k8s_class("channel", CHANNEL_DRIVER)]
    objects += [k8s_template("gpu-pair", "gpu", 2), k8s_template("imex-channel", "channel", 1)]
    return as_list(*objects, *extra)


def members(*claims: dict[str, str]) -> dict[str, Any]:
    pods = []
    for i in range(3):
        pod = k8s_pod(f"w-{i}", annotations={"scheduling.k8s.io/group-name": "job"}, resourceClaims=list(claims))
        pod["status"] = {"phase": "Pending"}
        pods.append(pod)
    return as_list(*pods)


GPUS = {"name": "gpus", "resourceClaimTemplateName": "gpu-pair"}
CHANNEL = {"name": "channel", "resourceClaimTemplateName": "imex-channel"}


def test_found_a_compute_domain_gang_in_one_clique_with_every_claim_allocated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, answer, err = run(tmp_path, cluster(3, COMPUTE_DOMAIN), members(GPUS, CHANNEL), capsys=capsys)
    assert code == 0, err
    assert answer["placed"] and answer["hypernode"] == "nvlink:c2"
    for pod in answer["pods"]:
        assert pod["node"].startswith("node-b")
        assert [c["name"] for c in pod["claims"]] == [f"{pod['name']}-gpus", f"{pod['name']}-channel"]
        gpus, channel = (c["allocation"] for c in pod["claims"])
        assert [r["device"] for r in gpus["devices"]["results"]] == ["gpu-0", "gpu-1"]
        assert channel["devices"]["results"][0]["driver"] == CHANNEL_DRIVER
        assert channel["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [pod["node"]]


def test_none_no_clique_holds_the_compute_domains_gang(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, answer, err = run(tmp_path, cluster(2, COMPUTE_DOMAIN), members(GPUS, CHANNEL), capsys=capsys)
    assert code == 1, err
    assert not answer["placed"] and all(p["node"] is None for p in answer["pods"])
    assert answer["reason"].startswith(
        "gang default/job: ComputeDomain default/imex keeps its pods in one NVLink clique (nvidia.com/gpu.clique)"
        " and none holds its 3 pending member(s) (the roomiest, nvlink:c1, takes 2)"
    )
    # Without the ComputeDomain the same gang spreads over the cliques and the free node.
    code, answer, err = run(tmp_path, cluster(2), members(GPUS, CHANNEL), capsys=capsys)
    assert code == 0 and answer["placed"], err


def test_none_a_member_needing_more_gpus_than_any_node_has_waits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = k8s_template("gpu-pair", "gpu", 4)  # a second template of the same name: the last one read stands
    code, answer, err = run(tmp_path, cluster(3, big), members(GPUS), capsys=capsys)
    assert code == 1, err
    assert "cannot allocate all claims" in answer["reason"]


def test_error_a_claim_the_cluster_lacks_is_kube_schedulers_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    named = members({"name": "data", "resourceClaimName": "shared"})
    code, answer, err = run(tmp_path, cluster(3), named, capsys=capsys)
    assert code == 1, err
    assert answer["reason"] == 'gang default/job: resourceclaim.resource.k8s.io "shared" not found'
    assert all(p["node"] is None for p in answer["pods"])


# --- a scheduling.k8s.io PodGroup's own claims (KEP-5729): one claim for the whole group --------------------


def fabric_cluster(group_claims: list[dict[str, str]]) -> dict[str, Any]:
    """Two nodes taking one pod each; one network-attached device (an allNodes slice) for both."""
    fabric = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "fabric"},
        "spec": {
            "driver": "fabric.example.com",
            "allNodes": True,
            "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "mem-0"}],
        },
    }
    group = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "resourceClaims": group_claims},
    }
    nodes = [k8s_node(n, pods="1") for n in ("node-a", "node-b")]
    objects = [*nodes, fabric, group, k8s_class("fabric", "fabric.example.com"), k8s_template("mem", "fabric", 1)]
    return as_list(*objects)


SHARED_MEMORY = {"name": "memory", "resourceClaimTemplateName": "mem"}


def group_pods() -> dict[str, Any]:
    pods = []
    for i in range(2):
        pod = k8s_pod(f"w-{i}", schedulingGroup={"podGroupName": "pg"}, resourceClaims=[SHARED_MEMORY])
        pod["status"] = {"phase": "Pending"}
        pods.append(pod)
    return as_list(*pods)


def test_found_a_pod_group_claim_is_made_once_and_shared_by_its_pods(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, answer, err = run(tmp_path, fabric_cluster([SHARED_MEMORY]), group_pods(), capsys=capsys)
    assert code == 0, err
    assert sorted(p["node"] for p in answer["pods"]) == ["node-a", "node-b"]
    claims = [c for p in answer["pods"] for c in p["claims"]]
    assert {c["name"] for c in claims} == {"pg-memory"}  # the group's one claim, not one per pod
    assert claims[0]["allocation"] == claims[1]["allocation"]
    assert claims[0]["allocation"]["devices"]["results"][0]["device"] == "mem-0"


def test_none_without_the_group_claim_each_pod_needs_a_device_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = {"name": "memory", "resourceClaimTemplateName": "other"}  # not equal in every field: not the pod's
    code, answer, err = run(tmp_path, fabric_cluster([other]), group_pods(), capsys=capsys)
    assert code == 1, err
    assert "cannot allocate all claims" in answer["reason"]


def test_the_compute_domain_example_goes_to_the_clique_with_four_free_nodes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    examples = Path(__file__).resolve().parents[2] / "examples"
    cluster, pods = examples / "gang-compute-domain.yaml", examples / "gang-compute-domain-pods.yaml"
    code = main(["engine", "place", "--cluster", str(cluster), "--pods", str(pods), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "not yet used" not in captured.err
    answer = json.loads(captured.out)
    assert answer["hypernode"] == "nvlink:rack-b.1"  # rack-a.1: gb200-a3's GPUs are another claim's
    assert [p["node"] for p in answer["pods"]] == [f"gb200-b{i}" for i in range(4)]
    for pod in answer["pods"]:
        gpus, channel = pod["claims"]
        assert len(gpus["allocation"]["devices"]["results"]) == 4
        config = channel["allocation"]["devices"]["config"][0]  # the template's, copied with its source
        assert config["source"] == "FromClaim" and config["opaque"]["parameters"]["domainID"] == "cd-uid-1"
