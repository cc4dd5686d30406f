"""`engine place --cluster`: kube-scheduler's per-node scores from Node and Pod objects.

Nodes bring `status.allocatable` and `status.images`, running pods their requests (counted for scoring with
kube's 100m / 200Mi for a pod that asks none), the pod its containers' images; each node's `score` in the
answer is NodeResourcesFit (LeastAllocated) + NodeResourcesBalancedAllocation + ImageLocality, as kube
computes them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_cli_cluster import as_list, k8s_node, k8s_pod, run

MIB = 1024 * 1024


def scores_of(answer: dict[str, Any]) -> dict[str, float | None]:
    return {n["name"]: n["score"] for n in answer["nodes"]}


def with_images(node: dict[str, Any], sizes_mib: dict[str, int]) -> dict[str, Any]:
    node["status"]["images"] = [{"names": [name], "sizeBytes": mb * MIB} for name, mb in sizes_mib.items()]
    return node


def with_image(pod: dict[str, Any], image: str) -> dict[str, Any]:
    pod["spec"]["containers"][0]["image"] = image
    return pod


def test_a_cpu_pod_is_scored_by_least_allocated_and_balance(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # k8s_node: 4 cpu, 8Gi. a runs a 2-cpu pod: with this 1-cpu pod cpu 3000/4000, memory 400Mi (two pods
    # asking none) of 8192Mi: Fit (25 + 95) / 2 = 60, balance 1 - |0.75 - 0| / 2 = 62 (its memory asked: 0).
    # b is empty: Fit (75 + 97) / 2 = 86, balance 1 - 0.25 / 2 = 87.
    cluster = as_list(k8s_node("a"), k8s_node("b"), k8s_pod("busy", node="a", cpu="2"))
    code, answer, _ = run(tmp_path, cluster, k8s_pod("p", cpu="1"), capsys=capsys)
    assert code == 0
    assert scores_of(answer) == {"a": 60.0 + 62, "b": 86.0 + 87}
    assert answer["node"] == "b" and answer["score"] == 173.0


def test_image_locality_from_node_status_images(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    holder = with_images(k8s_node("b"), {"example.com/big:1": 600, "example.com/other:1": 900})
    cluster = as_list(k8s_node("a"), holder, k8s_node("c"))
    code, answer, _ = run(tmp_path, cluster, with_image(k8s_pod("p"), "example.com/big:1"), capsys=capsys)
    assert code == 0
    scores = scores_of(answer)
    # one of three nodes holds 600 MiB: 200 MiB -> (200 - 23) * 100 / (1000 - 23) = 18
    assert scores["b"] - scores["a"] == 18.0 and scores["a"] == scores["c"]
    assert answer["node"] == "b"


def test_a_bad_image_size_exits_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    node = k8s_node("a")
    node["status"]["images"] = [{"names": ["x:1"], "sizeBytes": -1}]
    code, answer, err = run(tmp_path, as_list(node), k8s_pod("p"), capsys=capsys)
    assert code == 2 and answer is None
    assert "status.images[0].sizeBytes" in err
