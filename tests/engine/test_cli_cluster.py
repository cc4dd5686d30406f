"""`topoplace engine place --cluster ... --pods ...`: a cluster as Kubernetes objects -> the answer.

Each case is a cluster as `kubectl get nodes,pods -A -o json` prints it and a Pod to place, with
the answer kube-scheduler's filters give (its reason strings, word for word).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from engine_builders import fixture_node

from engine import Snapshot
from topoplace.cli import main

PORTS_REASON = "node(s) didn't have free ports for the requested pod ports"
SELECTOR_REASON = "node(s) didn't match Pod's node affinity/selector"


def k8s_node(name: str, *, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
             **allocatable: str) -> dict[str, Any]:  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": taints or []},
        "status": {
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10", **allocatable},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def k8s_pod(name: str, *, node: str = "", cpu: str = "", gpus: int = 0, host_port: int = 0,
            annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:  # fmt: skip
    container: dict[str, Any] = {"name": "main", "resources": {"requests": {"cpu": cpu} if cpu else {}}}
    if gpus:
        container["resources"]["limits"] = {"nvidia.com/gpu": str(gpus)}
    if host_port:
        container["ports"] = [{"containerPort": 80, "hostPort": host_port, "protocol": "TCP"}]
    body: dict[str, Any] = {"containers": [container], **spec}
    if node:
        body["nodeName"] = node
    meta = {"name": name, "namespace": "default", "uid": f"uid-{name}", "annotations": annotations or {}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body, "status": {"phase": "Running"}}


def as_list(*items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(items), "metadata": {"resourceVersion": ""}}


def run(
    tmp_path: Path, cluster: Any, pod: Any, *extra: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, Any, str]:
    cluster_file, pod_file = tmp_path / "cluster.json", tmp_path / "pod.json"
    cluster_file.write_text(json.dumps(cluster))
    pod_file.write_text(json.dumps(pod))
    code = main(["engine", "place", "--cluster", str(cluster_file), "--pods", str(pod_file), "--json", *extra])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out else None, captured.err


def reasons_of(answer: dict[str, Any]) -> dict[str, list[str]]:
    return {n["name"]: n["reasons"] for n in answer["nodes"]}


AFFINITY_B = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]
        }
    }
}
TAINT = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}

CASES: dict[str, tuple[list[dict[str, Any]], dict[str, Any], tuple[str, ...], str | None, dict[str, list[str]]]] = {
    # name: (cluster objects, pod to place, extra options, expected node, expected reasons per node)
    "pods full": (
        [k8s_node("a", pods="1"), k8s_node("b", pods="2"), k8s_pod("x", node="a"), k8s_pod("y", node="b")],
        k8s_pod("new"),
        (),
        "b",
        {"a": ["Too many pods"], "b": []},
    ),
    "every node full": (
        [k8s_node("a", pods="1"), k8s_pod("x", node="a")],
        k8s_pod("new"),
        (),
        None,
        {"a": ["Too many pods"]},
    ),
    "taint": (
        [k8s_node("a", taints=[TAINT]), k8s_node("b", taints=[TAINT])],
        k8s_pod("new"),
        (),
        None,
        {n: ["node(s) had untolerated taint {dedicated: infra}"] for n in "ab"},
    ),
    "taint tolerated": (
        [k8s_node("a", taints=[TAINT])],
        k8s_pod("new", tolerations=[TOLERATION]),
        (),
        "a",
        {"a": []},
    ),
    "selector": (
        [k8s_node("a", labels={"zone": "a"}), k8s_node("b", labels={"zone": "b"})],
        k8s_pod("new", nodeSelector={"zone": "b"}),
        (),
        "b",
        {"a": [SELECTOR_REASON], "b": []},
    ),
    "affinity": (
        [k8s_node("a", labels={"zone": "a"}), k8s_node("c", labels={"zone": "c"})],
        k8s_pod("new", affinity=AFFINITY_B),
        (),
        None,
        {"a": [SELECTOR_REASON], "c": [SELECTOR_REASON]},
    ),
    "host ports": (
        [k8s_node("a"), k8s_node("b"), k8s_pod("web", node="a", host_port=8080)],
        k8s_pod("new", host_port=8080),
        (),
        "b",
        {"a": [PORTS_REASON], "b": []},
    ),
    "running pods' requests": (
        [k8s_node("a"), k8s_node("b", cpu="500m"), k8s_pod("x", node="a", cpu="3500m")],
        k8s_pod("new", cpu="1"),
        (),
        None,
        {"a": ["Insufficient cpu"], "b": ["Insufficient cpu"]},
    ),
    "a finished pod takes nothing": (
        [k8s_node("a", pods="1"), {**k8s_pod("done", node="a"), "status": {"phase": "Succeeded"}}],
        k8s_pod("new"),
        (),
        "a",
        {"a": []},
    ),
    "--node": (
        [k8s_node("a"), k8s_node("b")],
        k8s_pod("new"),
        ("--node", "b"),
        "b",
        {"a": ["node(s) didn't match the requested node name"], "b": []},
    ),
    "gpus counted from allocatable": (
        [
            k8s_node("a", **{"nvidia.com/gpu": "2"}),
            k8s_node("b", **{"nvidia.com/gpu": "4"}),
            k8s_pod("x", node="b", gpus=3),
        ],
        k8s_pod("new", gpus=2),
        (),
        "a",
        {"a": [], "b": ["Insufficient nvidia.com/gpu"]},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_cluster_of_objects_gets_kube_schedulers_answer(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects, pod, extra, node, reasons = CASES[case]
    code, answer, _ = run(tmp_path, as_list(*objects), pod, *extra, capsys=capsys)
    assert answer["node"] == node
    assert code == (0 if node is not None else 1)
    assert reasons_of(answer) == reasons
    assert (answer["reason"] is None) == (node is not None)
    for entry in answer["nodes"]:
        assert (entry["score"] is None) == (not entry["fits"])


def test_multi_document_yaml_with_unused_kinds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    documents = [
        k8s_node("a", pods="1"),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "data"}},
        as_list(k8s_node("b"), k8s_pod("x", node="a")),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "logs"}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "fast"}},
    ]
    cluster, pod = tmp_path / "cluster.yaml", tmp_path / "pod.yaml"
    cluster.write_text(yaml.safe_dump_all(documents))
    pod.write_text(yaml.safe_dump(k8s_pod("new")))
    assert main(["engine", "place", "--cluster", str(cluster), "--pods", str(pod)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["node"] == "b"
    notes = [line for line in captured.err.splitlines() if "not yet used" in line]
    assert len(notes) == 2  # each unused kind named once
    assert "ConfigMap" in notes[0] and "Secret" in notes[1]


def test_clusters_from_several_files_and_single_objects(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "nodes.json").write_text(json.dumps(as_list(k8s_node("a"), k8s_node("b"))))
    (tmp_path / "pods.json").write_text(json.dumps(k8s_pod("web", node="a", host_port=53)))
    (tmp_path / "pod.json").write_text(json.dumps(k8s_pod("new", host_port=53)))
    files = ["--cluster", str(tmp_path / "nodes.json"), "--cluster", str(tmp_path / "pods.json")]
    assert main(["engine", "place", *files, "--pods", str(tmp_path / "pod.json")]) == 0
    assert reasons_of(json.loads(capsys.readouterr().out)) == {"a": [PORTS_REASON], "b": []}


def test_a_snapshot_gives_the_nodes_devices_and_the_pods_hold_theirs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # h100-a's topology from topoplace's snapshot; a running pod holds GPUs 0-5 by its annotation:
    # the pod asking for 2 gets the NVLinked 6 and 7, and the note says the devices were not verified.
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(msgspec.json.encode(Snapshot(nodes=(fixture_node("h100-a", "dgx-h100"),))).decode())
    held = json.dumps([{"index": i, "uuid": "", "memory_mib": 0, "cores": 100} for i in range(6)])
    running = k8s_pod("train", node="h100-a", gpus=6, annotations={"topoplace.io/devices": held})
    cluster = as_list(k8s_node("h100-a", **{"nvidia.com/gpu": "8"}), running)
    code, answer, _ = run(tmp_path, cluster, k8s_pod("new", gpus=2), "--snapshot", str(snapshot), capsys=capsys)
    assert code == 0
    assert [d["index"] for d in answer["devices"]] == [6, 7]
    assert answer["devices"][0]["uuid"].startswith("GPU-")


def test_a_snapshot_beside_the_cluster_is_read_strictly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    node = msgspec.to_builtins(fixture_node("h100-a", "dgx-h100"))
    node["redy"] = node.pop("ready")
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(json.dumps({"nodes": [node]}))
    cluster = as_list(k8s_node("h100-a", **{"nvidia.com/gpu": "8"}))
    code, answer, err = run(tmp_path, cluster, k8s_pod("new", gpus=2), "--snapshot", str(snapshot), capsys=capsys)
    assert code == 2 and answer is None
    assert "$.nodes[0].redy: unknown field (did you mean ready?)" in err


def test_the_seal_note_is_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    held = json.dumps([{"index": 0, "uuid": "", "memory_mib": 0, "cores": 100}])
    running = k8s_pod("train", node="a", gpus=1, annotations={"topoplace.io/devices": held})
    cluster_file, pod_file = tmp_path / "c.json", tmp_path / "p.json"
    cluster_file.write_text(json.dumps(as_list(k8s_node("a", **{"nvidia.com/gpu": "2"}), running)))
    pod_file.write_text(json.dumps(k8s_pod("new", gpus=1)))
    assert main(["engine", "place", "--cluster", str(cluster_file), "--pods", str(pod_file)]) == 0
    captured = capsys.readouterr()
    assert [d["index"] for d in json.loads(captured.out)["devices"]] == [1]
    assert "default/train: devices taken from topoplace.io/devices as written" in captured.err


BAD: dict[str, tuple[Any, Any, tuple[str, ...], str]] = {
    # name: (cluster, pod, extra options, what the one line names)
    "no kind": ({"items": []}, k8s_pod("new"), (), "cluster.json: kind: every object needs its kind"),
    "bad taint": (
        as_list(k8s_node("a", taints=[{"key": "k", "effect": "Sometimes"}])),
        k8s_pod("new"),
        (),
        "cluster.json: items[0]: spec.taints[0]",
    ),
    "bad quantity": (
        as_list(k8s_node("a")),
        k8s_pod("new", cpu="lots"),
        (),
        "pod.json: spec.containers[main].resources.cpu",
    ),
    "bad host port": (
        as_list(k8s_node("a")),
        k8s_pod("new", host_port=70000),
        (),
        "pod.json: spec.containers[0].ports[0]",
    ),
    "a node twice": (as_list(k8s_node("a"), k8s_node("a")), k8s_pod("new"), (), "items[1]: metadata.name"),
    "unknown --node": (as_list(k8s_node("a")), k8s_pod("new"), ("--node", "z"), "--node: no node 'z'"),
    "not a pod to place": (as_list(k8s_node("a")), k8s_node("b"), (), "pod.json: kind: expected Pod"),
    "bad feature gates": (as_list(k8s_node("a")), k8s_pod("new"), ("--feature-gates", "X=maybe"), "--feature-gates"),
    "two pods of no gang": (as_list(k8s_node("a")), as_list(k8s_pod("p"), k8s_pod("q")), (), "are not one gang"),
    "a gang without its PodGroup": (
        as_list(k8s_node("a")),
        as_list(*(k8s_pod(n, annotations={"scheduling.k8s.io/group-name": "job"}) for n in "pq")),
        (),
        "PodGroup 'default/job', which no --cluster file holds",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_exits_2_naming_the_file_and_field(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster, pod, extra, named = BAD[case]
    code, answer, err = run(tmp_path, cluster, pod, *extra, capsys=capsys)
    assert code == 2
    assert answer is None
    assert named in err
    assert len(err.strip().splitlines()) == 1


def test_an_unreadable_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pod.json").write_text(json.dumps(k8s_pod("new")))
    (tmp_path / "broken.yaml").write_text("kind: Node\n  metadata: [\n")
    assert (
        main(["engine", "place", "--cluster", str(tmp_path / "missing.json"), "--pods", str(tmp_path / "pod.json")])
        == 2
    )
    assert "missing.json" in capsys.readouterr().err
    assert (
        main(["engine", "place", "--cluster", str(tmp_path / "broken.yaml"), "--pods", str(tmp_path / "pod.json")]) == 2
    )
    assert "broken.yaml: not YAML" in capsys.readouterr().err


def test_the_installed_command_answers_and_exits_1_when_nothing_fits(tmp_path: Path) -> None:
    cluster, pod = tmp_path / "cluster.json", tmp_path / "pod.json"
    cluster.write_text(json.dumps(as_list(k8s_node("a", pods="1"), k8s_pod("x", node="a"))))
    pod.write_text(json.dumps(k8s_pod("new")))
    command = Path(sys.executable).with_name("topoplace")
    done = subprocess.run(
        [str(command), "engine", "place", "--cluster", str(cluster), "--pods", str(pod), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    answer = json.loads(done.stdout)
    assert answer == {
        "node": None,
        "devices": [],
        "score": 0.0,
        "reason": "0/1 nodes are available: 1 Too many pods."
        " preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
        "nodes": [{"name": "a", "fits": False, "reasons": ["Too many pods"], "score": None}],
        "victims": [],
        "nominated": False,
    }


def test_pods_of_one_volcano_gang_get_the_gang_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Two 8-GPU members of PodGroup default/job under one leaf switch: both placed, one per node, in s0.
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "job", "namespace": "default"}, "spec": {"minMember": 2}}  # fmt: skip
    leaf = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "s0"},
        "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-"}}}]},
    }
    nodes = [k8s_node(n, **{"nvidia.com/gpu": "8"}) for n in ("gpu-a", "gpu-b", "other")]
    members = [k8s_pod(n, gpus=8, annotations={"scheduling.k8s.io/group-name": "job"}) for n in ("w0", "w1")]
    code, answer, err = run(tmp_path, as_list(*nodes, group, leaf), as_list(*members), capsys=capsys)
    assert code == 0, err
    assert answer["placed"] is True
    assert answer["hypernode"] == "s0"
    assert sorted(p["node"] for p in answer["pods"]) == ["gpu-a", "gpu-b"]
    assert "not yet used" not in err  # PodGroups and HyperNodes are read


def _labelled(pod: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    pod["metadata"]["labels"] = labels
    return pod


def _gpu_tree() -> list[dict[str, Any]]:
    def hypernode(name: str, tier: int, kind: str, names: list[str]) -> dict[str, Any]:
        members = [{"type": kind, "selector": {"exactMatch": {"name": n}}} for n in names]
        return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
                "spec": {"tier": tier, "members": members}}  # fmt: skip

    return [
        hypernode("s0", 1, "Node", ["gpu-0", "gpu-1"]),
        hypernode("s1", 1, "Node", ["gpu-2", "gpu-3"]),
        hypernode("s2", 2, "HyperNode", ["s0", "s1"]),
    ]


def test_every_subgroup_policy_of_a_podgroup_and_its_label_selector_are_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The workers' policy is the second one and chooses its members by a selector expression: each
    # replica stays under one leaf (tier 1) although the gang may use the spine; ranks by pod index.
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "job", "namespace": "default"},
        "spec": {
            "minMember": 4,
            "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
            "subGroupPolicy": [
                {"name": "ps", "labelSelector": {"matchLabels": {"role": "ps"}}, "matchLabelKeys": ["ps"]},
                {
                    "name": "workers",
                    "labelSelector": {"matchExpressions": [{"key": "role", "operator": "In", "values": ["worker"]}]},
                    "matchLabelKeys": ["replica"],
                    "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
                },
            ],
        },
    }
    nodes = [k8s_node(f"gpu-{i}", **{"nvidia.com/gpu": "8"}) for i in range(4)]
    note = {"scheduling.k8s.io/group-name": "job"}
    members = [
        _labelled(
            k8s_pod(f"w-{i}", gpus=8, annotations=note),
            {"role": "worker", "replica": "ab"[i % 2], "batch.kubernetes.io/job-completion-index": str(i)},
        )
        for i in range(4)
    ]
    code, answer, err = run(tmp_path, as_list(*nodes, group, *_gpu_tree()), as_list(*members), capsys=capsys)
    assert code == 0, err
    leaf = {"gpu-0": "s0", "gpu-1": "s0", "gpu-2": "s1", "gpu-3": "s1"}
    replicas: dict[str, set[str]] = {}
    for pod in answer["pods"]:
        replicas.setdefault("ab"[int(pod["name"][2:]) % 2], set()).add(leaf[pod["node"]])
    assert replicas == {"a": {"s0"}, "b": {"s1"}}  # each replica under one leaf
    assert [(p["sub_group"], p["domain"], p["rank"]) for p in answer["pods"]] == [
        (f"workers/{'ab'[i % 2]}", leaf[answer["pods"][i]["node"]], i) for i in range(4)
    ]


def test_a_gang_that_fits_only_at_its_min_member_is_placed_at_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "job", "namespace": "default"}, "spec": {"minMember": 1}}  # fmt: skip
    note = {"scheduling.k8s.io/group-name": "job"}
    members = [k8s_pod(f"w-{i}", gpus=8, annotations=note) for i in range(2)]
    cluster = as_list(k8s_node("gpu-0", **{"nvidia.com/gpu": "8"}), group)
    code, answer, err = run(tmp_path, cluster, as_list(*members), capsys=capsys)
    assert code == 0, err
    assert answer["placed"] is True and answer["partial"] is True
    assert [(p["name"], p["node"]) for p in answer["pods"]] == [("w-0", "gpu-0"), ("w-1", None)]
