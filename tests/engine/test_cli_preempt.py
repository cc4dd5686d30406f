"""`topoplace engine place --cluster`: a pod that fits only by preemption is nominated, its victims named.

PriorityClasses (priorityClassName, globalDefault, preemptionPolicy) and PodDisruptionBudgets (their
status, or minAvailable counted over the running pods) are read from the cluster's files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_cli_cluster import as_list, k8s_node, k8s_pod, run

from engine.decide.preempt import RunningPod
from topoplace.cluster_objects.files import ClusterObject
from topoplace.cluster_objects.priority import budget as read_budget

NEVER = "preemption: not eligible due to preemptionPolicy=Never."


def priority_class(name: str, value: int, *, default: bool = False, policy: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                            "metadata": {"name": name}, "value": value, "globalDefault": default}  # fmt: skip
    if policy is not None:
        body["preemptionPolicy"] = policy
    return body


def budget(name: str, labels: dict[str, str], *, allowed: int | None = None,
           min_available: int | str = 1) -> dict[str, Any]:  # fmt: skip
    body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                            "metadata": {"name": name, "namespace": "default"},
                            "spec": {"selector": {"matchLabels": labels}, "minAvailable": min_available}}  # fmt: skip
    if allowed is not None:
        body["status"] = {"disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
    return body


def bound(name: str, node: str, *, start: str = "2026-01-01T00:00:00Z", labels: dict[str, str] | None = None,
          **spec: Any) -> dict[str, Any]:  # fmt: skip
    pod = k8s_pod(name, node=node, cpu="4", **spec)
    pod["status"]["startTime"] = start
    pod["metadata"]["labels"] = labels or {}
    return pod


CLASSES = [priority_class("low", 10), priority_class("high", 100), priority_class("batch", 1, default=True)]


def test_a_pod_that_fits_by_preemption_is_nominated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = as_list(
        *CLASSES, k8s_node("a"), k8s_node("b"),
        bound("low", "a", priorityClassName="low"), bound("critical", "b", priority=1000),
    )  # fmt: skip
    code, answer, _ = run(tmp_path, cluster, k8s_pod("new", cpu="2", priorityClassName="high"), capsys=capsys)
    assert code == 0
    assert (answer["node"], answer["victims"], answer["nominated"], answer["reason"]) == (
        "a", ["default/low"], True, None,
    )  # fmt: skip
    assert answer["preemption"]["victims"] == [
        {"pod": "default/low", "priority": 10, "violates_budget": False, "why": "priority 10 < 100"}
    ]
    assert answer["preemption"]["unschedulable"] == "0/2 nodes are available: 2 Insufficient cpu."
    assert answer["preemption"]["candidates"] == ["a"]


def test_a_pod_that_fits_has_no_victims(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, answer, _ = run(tmp_path, as_list(*CLASSES, k8s_node("a")), k8s_pod("new", cpu="2"), capsys=capsys)
    assert (code, answer["node"], answer["victims"], answer["nominated"]) == (0, "a", [], False)
    assert "preemption" not in answer


def test_global_default_priority_makes_equals_no_victims(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Both pods name no class: both get batch's 1, so the running one is no victim.
    cluster = as_list(*CLASSES, k8s_node("a"), bound("other", "a"))
    code, answer, _ = run(tmp_path, cluster, k8s_pod("new", cpu="2"), capsys=capsys)
    assert code == 1
    assert answer["reason"] == (
        "0/1 nodes are available: 1 Insufficient cpu."
        " preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )
    assert (answer["victims"], answer["nominated"]) == ([], False)


@pytest.mark.parametrize("where", ["class", "pod"])
def test_preemption_policy_never(where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    classes = [*CLASSES, priority_class("polite", 100, policy="Never")]
    spec = {"priorityClassName": "polite"} if where == "class" else {"priority": 100, "preemptionPolicy": "Never"}
    cluster = as_list(*classes, k8s_node("a"), bound("low", "a", priorityClassName="low"))
    code, answer, _ = run(tmp_path, cluster, k8s_pod("new", cpu="2", **spec), capsys=capsys)
    assert code == 1
    assert answer["reason"] == f"0/1 nodes are available: 1 Insufficient cpu. {NEVER}"


@pytest.mark.parametrize("with_status", [True, False])
def test_a_budget_steers_to_the_node_without_violations(
    with_status: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # db on a is protected (status: 0 allowed; or minAvailable 1 of its 1 pod); web on b is not.
    pdb = budget("db", {"app": "db"}, allowed=0 if with_status else None)
    cluster = as_list(
        *CLASSES, k8s_node("a"), k8s_node("b"), pdb,
        bound("db", "a", labels={"app": "db"}, priorityClassName="batch"),
        bound("web", "b", labels={"app": "web"}, priorityClassName="low"),
    )  # fmt: skip
    code, answer, _ = run(tmp_path, cluster, k8s_pod("new", cpu="2", priorityClassName="high"), capsys=capsys)
    assert (code, answer["node"], answer["victims"]) == (0, "b", ["default/web"])
    assert answer["preemption"]["candidates"] == ["b", "a"]


def test_a_nominated_pod_waits_for_its_terminating_victims(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    going = bound("going", "a", priorityClassName="low")
    going["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    going["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]
    pod = k8s_pod("new", cpu="2", priorityClassName="high")
    pod["status"] = {"phase": "Pending", "nominatedNodeName": "a"}
    code, answer, _ = run(tmp_path, as_list(*CLASSES, k8s_node("a"), going), pod, capsys=capsys)
    assert code == 1
    assert answer["reason"].endswith(" preemption: not eligible due to a terminating pod on the nominated node.")


def test_a_class_no_file_holds_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = as_list(*CLASSES, k8s_node("a"), bound("low", "a", priorityClassName="missing"))
    code, _, err = run(tmp_path, cluster, k8s_pod("new", cpu="2"), capsys=capsys)
    assert code == 2
    assert "spec.priorityClassName: no PriorityClass 'missing' in the cluster" in err


def test_devices_a_counted_node_frees(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A node known only by its count of 8 GPUs, two pods holding 4 each: the 4-GPU preemptor evicts one.
    node = k8s_node("g", **{"nvidia.com/gpu": "8"})
    first = k8s_pod("first", node="g", gpus=4, priorityClassName="low")
    second = k8s_pod("second", node="g", gpus=4, priorityClassName="low")
    second["status"]["startTime"] = "2026-01-02T00:00:00Z"
    first["status"]["startTime"] = "2026-01-01T00:00:00Z"
    code, answer, _ = run(
        tmp_path, as_list(*CLASSES, node, first, second), k8s_pod("new", gpus=4, priorityClassName="high"),
        capsys=capsys,
    )  # fmt: skip
    assert (code, answer["victims"]) == (0, ["default/second"])  # the later started of equals
    assert sorted(d["index"] for d in answer["devices"]) == [4, 5, 6, 7]  # the GPUs it held
    assert answer["preemption"]["count_only"] is None  # no links: counting devices chooses the same


@pytest.mark.parametrize(("priority", "node", "victims"), [(50, "a", ["default/low"]), (200, "a", [])])
def test_a_nominated_pod_holds_its_room_from_pods_of_lower_or_equal_priority(
    priority: int, node: str, victims: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "waiting" (priority 100) is nominated to a, whose 4 CPUs hold low (2, priority 10). A pod of
    # priority 50 finds only 2 CPUs there once waiting's 2 are held: it must evict low. A pod of
    # priority 200 does not count waiting and fits as things are.
    low = k8s_pod("low", node="a", cpu="2", priority=10)
    waiting = k8s_pod("waiting", cpu="2", priority=100)
    waiting["status"] = {"phase": "Pending", "nominatedNodeName": "a"}
    cluster = as_list(k8s_node("a"), low, waiting)
    code, answer, _ = run(tmp_path, cluster, k8s_pod("new", cpu="2", priority=priority), capsys=capsys)
    assert (code, answer["node"], answer["victims"], answer["nominated"]) == (0, node, victims, bool(victims))


@pytest.mark.parametrize(
    ("spec", "status", "allowed"),
    [
        ({"minAvailable": 2}, None, 1),  # 3 healthy, keep 2
        ({"minAvailable": "50%"}, None, 1),  # 50% of 3 rounded up: keep 2
        ({"maxUnavailable": 1}, None, 1),
        ({"maxUnavailable": "50%"}, None, 2),  # 50% of 3 rounded up
        ({"minAvailable": 5}, None, 0),  # never below 0
        ({"minAvailable": 0}, {"disruptionsAllowed": 0}, 0),  # the status, as kube-scheduler reads it
    ],
)
def test_a_budget_counts_as_the_disruption_controller_would(
    spec: dict[str, Any], status: dict[str, Any] | None, allowed: int
) -> None:
    body: dict[str, Any] = {"kind": "PodDisruptionBudget", "metadata": {"name": "db", "namespace": "default"},
                            "spec": {"selector": {"matchLabels": {"app": "db"}}, **spec}}  # fmt: skip
    if status is not None:
        body["status"] = status
    pods = [RunningPod(name=f"db-{i}", node="a", labels={"app": "db"}) for i in range(3)]
    pods.append(RunningPod(name="web", node="a", labels={"app": "web"}))
    assert (
        read_budget(ClusterObject(kind="PodDisruptionBudget", where="f", body=body), pods).disruptions_allowed
        == allowed
    )


def test_a_budget_with_a_bad_percentage_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pdb = budget("db", {"app": "db"}, min_available="half")
    code, _, err = run(tmp_path, as_list(k8s_node("a"), pdb), k8s_pod("new"), capsys=capsys)
    assert code == 2
    assert "spec.minAvailable: expected a number or a percentage, got 'half'" in err


def test_the_pod_to_place_naming_a_missing_class_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # as the API server's admission refuses it, even where it would fit
    code, _, err = run(tmp_path, as_list(k8s_node("a")), k8s_pod("new", priorityClassName="gold"), capsys=capsys)
    assert code == 2
    assert "spec.priorityClassName: no PriorityClass 'gold' in the cluster" in err


def _gang_cluster() -> list[dict[str, Any]]:
    from test_cli_cluster import _gpu_tree

    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "job", "namespace": "default"},
             "spec": {"minMember": 2, "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}}  # fmt: skip
    old = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
           "metadata": {"name": "old", "namespace": "default"}, "spec": {"minMember": 2}}  # fmt: skip
    nodes = [k8s_node(f"gpu-{i}", **{"nvidia.com/gpu": "8"}) for i in range(4)]

    def held(name: str, node: str, cls: str, group_name: str = "") -> dict[str, Any]:
        annotations = {"scheduling.k8s.io/group-name": group_name} if group_name else {}
        pod = k8s_pod(name, node=node, gpus=8, annotations=annotations, priorityClassName=cls)
        pod["status"]["startTime"] = "2026-01-01T00:00:00Z"
        return pod

    running = [
        held("low", "gpu-0", "low"),
        held("old-0", "gpu-1", "low", "old"),
        held("critical", "gpu-2", "high"),
        held("old-1", "gpu-3", "low", "old"),
    ]
    return [*CLASSES, *nodes, group, old, *_gpu_tree(), *running]


def test_a_gang_that_fits_by_preemption_names_each_members_victims(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # s0 (gpu-0, gpu-1) is emptied: s1 holds a pod of the gang's priority. old-0's gang (minMember 2) would
    # be left with one member: old-1, on gpu-3 outside s0, goes too.
    members = [k8s_pod(n, gpus=8, annotations={"scheduling.k8s.io/group-name": "job"}, priorityClassName="high")
               for n in ("w0", "w1")]  # fmt: skip
    code, answer, err = run(tmp_path, as_list(*_gang_cluster()), as_list(*members), capsys=capsys)
    assert code == 0, err
    assert (answer["placed"], answer["hypernode"], answer["nominated"]) == (True, "s0", True)
    assert sorted(answer["victims"]) == ["default/low", "default/old-0", "default/old-1"]
    by_node = {p["node"]: p["victims"] for p in answer["pods"]}
    assert by_node == {"gpu-0": ["default/low"], "gpu-1": ["default/old-0"]}
    assert all(p["nominated"] for p in answer["pods"])
    assert answer["preemption"]["whole_gangs"] == ["default/old"]
    assert answer["preemption"]["unschedulable"].startswith("gang default/job: no hypernode of tier <= 1")


def test_a_gang_that_cannot_preempt_keeps_its_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    members = [k8s_pod(n, gpus=8, annotations={"scheduling.k8s.io/group-name": "job"}, priorityClassName="low")
               for n in ("w0", "w1")]  # fmt: skip
    code, answer, _ = run(tmp_path, as_list(*_gang_cluster()), as_list(*members), capsys=capsys)
    assert code == 1
    assert answer["placed"] is False
    assert answer["reason"].endswith(
        "preemption: no hypernode of tier <= 1 holds gang default/job after evicting its lower-priority pods"
    )
