"""`topoplace engine place --cluster`: InterPodAffinity and PodTopologySpread from Pod objects.

Running pods (with `spec.nodeName`) bring their labels and pod (anti-)affinity, Namespaces their labels,
Services and controllers the selector of the cluster-default spread constraints; the answer lists each
node with kube-scheduler's reasons, or its score.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from test_cli_cluster import as_list, k8s_node, k8s_pod, reasons_of, run

ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"
SPREAD = "node(s) didn't match pod topology spread constraints"
MISSING = f"{SPREAD} (missing required label)"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def node(name: str, zone: str | None = None) -> dict[str, Any]:
    labels = {HOSTNAME: name} | ({ZONE: zone} if zone else {})
    return k8s_node(name, labels=labels)


def labelled(pod: dict[str, Any], namespace: str = "default", **labels: str) -> dict[str, Any]:
    pod["metadata"]["labels"] = labels
    pod["metadata"]["namespace"] = namespace
    return pod


def anti(key: str, labels: dict[str, str], **extra: Any) -> dict[str, Any]:
    term = {"topologyKey": key, "labelSelector": {"matchLabels": labels}, **extra}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def scores_of(answer: dict[str, Any]) -> dict[str, float | None]:
    return {n["name"]: n["score"] for n in answer["nodes"]}


def test_anti_affinity_one_replica_per_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = as_list(node("n1"), node("n2"), labelled(k8s_pod("web-1", node="n1"), app="web"))
    pod = labelled(k8s_pod("web-2", affinity=anti(HOSTNAME, {"app": "web"})), app="web")
    code, answer, _ = run(tmp_path, cluster, pod, capsys=capsys)
    assert code == 0
    assert answer["node"] == "n2"
    assert reasons_of(answer) == {"n1": [ANTI], "n2": []}


def test_existing_pods_anti_affinity_with_a_namespace_selector(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    guard = anti(ZONE, {"app": "web"}, namespaceSelector={"matchLabels": {"tier": "public"}})
    cluster = as_list(
        node("a1", "a"),
        node("b1", "b"),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {"tier": "public"}}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lab", "labels": {"tier": "private"}}},
        labelled(k8s_pod("loner", node="a1", affinity=guard), "ops", app="batch"),
    )
    public = labelled(k8s_pod("web", cpu="1"), "shop", app="web")
    code, answer, err = run(tmp_path, cluster, public, capsys=capsys)
    assert (code, answer["node"]) == (0, "b1")
    assert reasons_of(answer) == {"a1": [EXISTING], "b1": []}
    assert "not yet used: Namespace" not in err
    private = labelled(k8s_pod("web"), "lab", app="web")
    code, answer, _ = run(tmp_path, cluster, private, capsys=capsys)
    assert reasons_of(answer) == {"a1": [], "b1": []}


def test_spread_constraints_refuse_the_crowded_zone_and_the_unlabelled_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = as_list(
        node("a1", "a"),
        node("b1", "b"),
        node("bare"),
        labelled(k8s_pod("w1", node="a1"), app="web"),
    )
    constraint = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                  "labelSelector": {"matchLabels": {"app": "web"}}}  # fmt: skip
    pod = labelled(k8s_pod("w2", topologySpreadConstraints=[constraint]), app="web")
    code, answer, _ = run(tmp_path, cluster, pod, capsys=capsys)
    assert code == 0
    assert reasons_of(answer) == {"a1": [SPREAD], "b1": [], "bare": [MISSING]}  # a1: 1 + 1 - 0 > 1
    assert answer["node"] == "b1"


def test_a_replica_set_and_its_service_spread_the_pod_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    owner = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d", "controller": True, "uid": "rs"}]
    replicas = [labelled(k8s_pod(f"w{i}", node="n1"), app="web") for i in range(3)]
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
               "spec": {"selector": {"app": "web"}}}  # fmt: skip
    replica_set = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                   "metadata": {"name": "web-7d", "namespace": "default"},
                   "spec": {"selector": {"matchLabels": {"app": "web"}}}}  # fmt: skip
    pod = labelled(k8s_pod("w9"), app="web")
    pod["metadata"]["ownerReferences"] = owner
    cluster = as_list(node("n1", "a"), node("n2", "a"), *replicas, service, replica_set)
    code, answer, err = run(tmp_path, cluster, pod, capsys=capsys)
    assert code == 0
    # hostname maxSkew 3 (2 nodes: log 4) and zone maxSkew 5 (one zone: log 3): n1 holds the 3 replicas
    raw = {"n1": round(3 * math.log(4) + 2 + 3 * math.log(3) + 4), "n2": round(0 + 2 + 3 * math.log(3) + 4)}
    high, low = max(raw.values()), min(raw.values())
    # plus NodeResourcesFit's LeastAllocated with kube's defaults for pods that ask nothing (100m, 200Mi):
    # n1 (3 replicas + this pod) cpu (4000 - 400) / 4000 = 90, memory (8192 - 800) / 8192 = 90; n2 97 and 97
    fit = {"n1": 90, "n2": 97}
    assert scores_of(answer) == {n: 2.0 * (100 * (high + low - s) // high) + fit[n] for n, s in raw.items()}
    assert answer["node"] == "n2"
    assert "not yet used" not in err
    # without the Service and the ReplicaSet: no default constraints, LeastAllocated alone
    code, answer, _ = run(tmp_path, as_list(node("n1", "a"), node("n2", "a"), *replicas), pod, capsys=capsys)
    assert scores_of(answer) == {"n1": 90.0, "n2": 97.0}


def test_a_bad_spread_constraint_exits_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = {"maxSkew": 0, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
    code, answer, err = run(tmp_path, as_list(node("n1")), k8s_pod("p", topologySpreadConstraints=[bad]), capsys=capsys)
    assert code == 2
    assert answer is None
    assert "spec.topologySpreadConstraints[0]" in err and "maxSkew" in err


def test_a_pod_being_deleted_does_not_count_for_spread(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    leaving = labelled(k8s_pod("old", node="a1"), app="web")
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    constraint = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                  "labelSelector": {"matchLabels": {"app": "web"}}}  # fmt: skip
    pod = labelled(k8s_pod("new", topologySpreadConstraints=[constraint]), app="web")
    code, answer, _ = run(tmp_path, as_list(node("a1", "a"), node("b1", "b"), leaving), pod, capsys=capsys)
    assert code == 0
    assert reasons_of(answer) == {"a1": [], "b1": []}
