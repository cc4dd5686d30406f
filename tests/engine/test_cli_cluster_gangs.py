"""`topoplace engine place --cluster ... --pods ...` with the gang objects of every framework: Kubernetes'
Workload API (v1alpha1 and v1alpha2), KAI's PodGroup and Topology, Kueue's Topology; and the examples."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_cli_cluster import as_list, k8s_node, k8s_pod, run

from topoplace.cli import main

RACK, BLOCK = "example.com/topology-rack", "example.com/topology-block"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def rack_nodes() -> list[dict[str, Any]]:
    """Four 8-GPU nodes: rack r0 = gpu-0, gpu-1 and rack r1 = gpu-2, gpu-3, one block."""
    return [k8s_node(f"gpu-{i}", labels={RACK: f"r{i // 2}", BLOCK: "b0"}, **{"nvidia.com/gpu": "8"}) for i in range(4)]


def rack_of(node: str) -> str:
    return f"r{int(node.split('-')[1]) // 2}"


def run_example(name: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, Any, str]:
    import json

    cluster, pods = EXAMPLES / f"{name}.yaml", EXAMPLES / f"{name}-pods.yaml"
    code = main(["engine", "place", "--cluster", str(cluster), "--pods", str(pods), "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out else None, captured.err


def test_the_workload_api_example_places_its_pod_group_in_one_rack(capsys: pytest.CaptureFixture[str]) -> None:
    code, answer, err = run_example("gang-workload-api", capsys)
    assert code == 0, err
    assert answer["gang"] == "default/training-workers" and answer["placed"]
    # rack-a0 has one free node (a running pod holds gpu-a00): both members go to rack-a1
    assert [p["node"] for p in answer["pods"]] == ["gpu-a10", "gpu-a11"]
    assert "not yet used" not in err


def test_the_kai_example_keeps_each_subgroup_in_a_rack_and_the_job_in_a_block(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, answer, err = run_example("gang-kai", capsys)
    assert code == 0, err
    assert answer["placed"] and answer["hypernode"] == "block-b"  # block-a has 3 free nodes, the job needs 4
    domains = {p["sub_group"]: set() for p in answer["pods"]}
    for p in answer["pods"]:
        domains[p["sub_group"]].add(p["domain"])
    assert domains == {"prefill/prefill": {"block-b/rack-b0"}, "decode/decode": {"block-b/rack-b1"}}


def test_the_kueue_example_reads_its_topology_and_multi_layer_slices(capsys: pytest.CaptureFixture[str]) -> None:
    code, answer, err = run_example("gang-kueue-slices", capsys)
    assert code == 0, err
    assert answer["placed"] and {p["domain"] for p in answer["pods"]} == {"block-a/rack-a1"}


def test_the_kueue_balanced_example_spreads_its_pod_group_evenly(capsys: pytest.CaptureFixture[str]) -> None:
    code, answer, err = run_example("gang-kueue-balanced", capsys)
    assert code == 0, err
    nodes = [p["node"] for p in answer["pods"]]
    assert answer["placed"] and nodes == ["gpu-a00"] * 6 + ["gpu-a10"] * 6  # Kueue's best fit: 8 and 4
    assert "not used" not in err  # Kueue's Configuration is read


def test_a_v1alpha1_workload_pod_group_gathers_its_pods_by_workload_ref(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workload = {
        "apiVersion": "scheduling.k8s.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "job", "namespace": "default"},
        "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 3}}}]},
    }
    ref = {"name": "job", "podGroup": "workers"}
    pods = [k8s_pod(f"w-{i}", gpus=8, workloadRef=ref) for i in range(3)]
    code, answer, err = run(tmp_path, as_list(*rack_nodes(), workload), as_list(*pods), capsys=capsys)
    assert code == 0, err
    assert answer["gang"] == "default/job-workers" and answer["placed"]
    # minCount 3 of 3: all or nothing; with one node taken, 2 fit and the gang is refused
    busy = k8s_pod("other", node="gpu-0", gpus=8)
    cluster = as_list(*rack_nodes()[:3], busy, workload)
    code, answer, err = run(tmp_path, cluster, as_list(*pods), capsys=capsys)
    assert code == 1 and not answer["placed"]


def test_a_pod_group_topology_key_without_a_topology_object_is_the_label_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    group = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "default"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "schedulingConstraints": {"topology": [{"key": RACK}]}},
    }
    busy = k8s_pod("other", node="gpu-0", gpus=8)
    pods = [k8s_pod(f"w-{i}", gpus=8, schedulingGroup={"podGroupName": "pg"}) for i in range(2)]
    code, answer, err = run(tmp_path, as_list(*rack_nodes(), busy, group), as_list(*pods), capsys=capsys)
    assert code == 0, err
    assert {rack_of(p["node"]) for p in answer["pods"]} == {"r1"}  # r0 has one free node only
    three = [*pods, k8s_pod("w-2", gpus=8, schedulingGroup={"podGroupName": "pg"})]
    code, answer, err = run(tmp_path, as_list(*rack_nodes(), group), as_list(*three), capsys=capsys)
    assert code == 0 and answer["partial"]  # no rack takes 3: minCount 2 placed in one rack, one waits
    placed = [p["node"] for p in answer["pods"] if p["node"]]
    assert len(placed) == 2 and len({rack_of(n) for n in placed}) == 1


def test_a_kai_pod_group_is_read_as_kais_not_volcanos(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topology = {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": "fabric"},
        "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}]},
    }
    group = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "job", "namespace": "default"},
        "spec": {"minMember": 2, "topologyConstraint": {"topology": "fabric", "requiredTopologyLevel": RACK}},
    }
    pods = [k8s_pod(f"w-{i}", gpus=8, annotations={"pod-group-name": "job"}) for i in range(2)]
    code, answer, err = run(tmp_path, as_list(*rack_nodes(), topology, group), as_list(*pods), capsys=capsys)
    assert code == 0, err
    assert answer["gang"] == "default/job" and len({rack_of(p["node"]) for p in answer["pods"]}) == 1
    code, _, err = run(tmp_path, as_list(*rack_nodes(), group), as_list(*pods), capsys=capsys)
    assert code == 2 and "Topology 'fabric'" in err


def test_a_kueue_topology_gives_the_required_level(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topology = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Topology",
        "metadata": {"name": "default"},
        "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}]},
    }
    notes = {
        "kueue.x-k8s.io/pod-group-name": "job",
        "kueue.x-k8s.io/pod-group-total-count": "3",
        "kueue.x-k8s.io/podset-required-topology": RACK,
    }
    pods = [k8s_pod(f"w-{i}", gpus=8, annotations=notes) for i in range(3)]
    code, answer, err = run(tmp_path, as_list(*rack_nodes(), topology), as_list(*pods), capsys=capsys)
    assert code == 1, err  # no rack holds three 8-GPU pods: required, so never placed
    assert not answer["placed"] and all(p["node"] is None for p in answer["pods"])
    two = [
        k8s_pod(f"w-{i}", gpus=8, annotations={**notes, "kueue.x-k8s.io/pod-group-total-count": "2"}) for i in range(2)
    ]
    code, answer, err = run(tmp_path, as_list(*rack_nodes(), topology), as_list(*two), capsys=capsys)
    assert code == 0, err
    assert answer["placed"] and len({rack_of(p["node"]) for p in answer["pods"]}) == 1


def test_kueues_balanced_placement_gate_balances_a_preferred_level(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Kueue's "balanced placement; basic" case: two 15-CPU nodes in two racks of a block, 25 pods, rack preferred
    topology = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": "default"},
        "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": "kubernetes.io/hostname"}]},
    }
    host = "kubernetes.io/hostname"
    nodes = [k8s_node(f"x{i}", labels={BLOCK: "b1", RACK: f"r{i}", host: f"x{i}"}, cpu="15", pods="30") for i in (1, 2)]
    notes = {
        "kueue.x-k8s.io/pod-group-name": "job",
        "kueue.x-k8s.io/pod-group-total-count": "25",
        "kueue.x-k8s.io/podset-preferred-topology": RACK,
    }
    pods = as_list(*(k8s_pod(f"w-{i}", cpu="1", annotations=notes) for i in range(25)))

    def per_node(*extra: str) -> dict[str, int]:
        code, answer, err = run(tmp_path, as_list(*nodes, topology), pods, *extra, capsys=capsys)
        assert code == 0, err
        assert "TASBalancedPlacement: not used" not in err
        counts: dict[str, int] = {}
        for pod in answer["pods"]:
            counts[pod["node"]] = counts.get(pod["node"], 0) + 1
        return counts

    assert per_node("--feature-gates", "TASBalancedPlacement=true") == {"x1": 13, "x2": 12}
    assert per_node() == {"x1": 15, "x2": 10}  # Kueue's default: off, best fit
    assert per_node("--feature-gates", "TASBalancedPlacement=false") == {"x1": 15, "x2": 10}
    # Kueue's own configuration file switches it on too (the command line wins, as a later flag would)
    configuration = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "featureGates": {"TASBalancedPlacement": True},
    }
    nodes.append(configuration)
    assert per_node() == {"x1": 13, "x2": 12}
    assert per_node("--feature-gates", "TASBalancedPlacement=false") == {"x1": 15, "x2": 10}
    code, _, err = run(tmp_path, as_list(*nodes, configuration, topology), pods, capsys=capsys)
    assert code == 2 and "Configuration given twice" in err


BAD = {
    "a pod group no file holds": (
        [k8s_pod(f"w-{i}", gpus=8, schedulingGroup={"podGroupName": "missing"}) for i in range(2)],
        "PodGroup 'default/missing' (scheduling.k8s.io), which no --cluster file holds",
    ),
    "a workload no file holds": (
        [k8s_pod(f"w-{i}", gpus=8, workloadRef={"name": "nope", "podGroup": "w"}) for i in range(2)],
        "Workload 'default/nope', which no --cluster file holds",
    ),
    "two pod groups": (
        [k8s_pod(f"w-{i}", gpus=8, schedulingGroup={"podGroupName": f"g{i}"}) for i in range(2)],
        "different scheduling.k8s.io pod groups",
    ),
    "a KAI pod group no file holds": (
        [k8s_pod(f"w-{i}", gpus=8, annotations={"pod-group-name": "kai"}) for i in range(2)],
        "KAI PodGroup 'default/kai'",
    ),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_pods_naming_a_gang_the_cluster_lacks_exit_2(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pods, message = BAD[case]
    code, _, err = run(tmp_path, as_list(*rack_nodes()), as_list(*pods), capsys=capsys)
    assert code == 2
    assert message in err


def test_two_fabrics_each_gang_uses_the_topology_of_its_resource_flavor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An H100 spine-leaf pool and a GB200 rack pool, a Kueue Topology and ResourceFlavor each, both naming
    # their lowest level by one label: a gang admitted to a flavor (its pods' nodeSelector holds the
    # flavor's labels) is placed in that flavor's tree, not the first Topology that has the level.
    spine = "example.com/spine"
    leaf = nvl = "example.com/rack"

    def topology(name: str, levels: list[str]) -> dict[str, Any]:
        return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": name},
                "spec": {"levels": [{"nodeLabel": level} for level in levels]}}  # fmt: skip

    def flavor(name: str, pool: str, tree: str) -> dict[str, Any]:
        return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name},
                "spec": {"nodeLabels": {"pool": pool}, "topologyName": tree}}  # fmt: skip

    h100 = [
        k8s_node(f"h100-{i}", labels={"pool": "h100", spine: "s0", leaf: f"l{i // 2}"}, **{"nvidia.com/gpu": "8"})
        for i in range(4)
    ]
    gb200 = [
        k8s_node(f"gb200-{i}", labels={"pool": "gb200", nvl: f"rack{i // 2}"}, **{"nvidia.com/gpu": "4"})
        for i in range(4)
    ]
    objects = [*h100, *gb200, topology("h100-fabric", [spine, leaf]), topology("nvl72", [nvl])]
    objects += [flavor("h100", "h100", "h100-fabric"), flavor("gb200", "gb200", "nvl72")]

    def gang(pool: str, level: str, gpus: int) -> list[dict[str, Any]]:
        notes = {"kueue.x-k8s.io/pod-group-name": pool, "kueue.x-k8s.io/pod-group-total-count": "2",
                 "kueue.x-k8s.io/podset-required-topology": level}  # fmt: skip
        return [k8s_pod(f"{pool}-{i}", gpus=gpus, annotations=notes, nodeSelector={"pool": pool}) for i in range(2)]

    code, answer, err = run(tmp_path, as_list(*objects), as_list(*gang("gb200", nvl, 4)), capsys=capsys)
    assert code == 0, err
    assert answer["placed"] and answer["hypernode"] in ("rack0", "rack1") and answer["tier"] == 1
    code, answer, err = run(tmp_path, as_list(*objects), as_list(*gang("h100", leaf, 8)), capsys=capsys)
    assert code == 0, err
    assert answer["hypernode"] in ("s0/l0", "s0/l1")
    assert {p["node"][:4] for p in answer["pods"]} == {"h100"}


GROUP_ERRORS = {
    "KAI minMember 0": (
        {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
         "metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 0}},
        {"annotations": {"pod-group-name": "g"}},
        "KAI PodGroup 'default/g': spec.minMember: must be at least 1, got 0",
    ),
    "scheduling.k8s.io minCount 0": (
        {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": "g"},
         "spec": {"schedulingPolicy": {"gang": {"minCount": 0}}}},
        {"schedulingGroup": {"podGroupName": "g"}},
        "scheduling.k8s.io PodGroup 'default/g': spec.schedulingPolicy.gang.minCount: must be at least 1, got 0",
    ),
    "scheduling.k8s.io basic and gang": (
        {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": "g"},
         "spec": {"schedulingPolicy": {"basic": {}, "gang": {"minCount": 1}}}},
        {"schedulingGroup": {"podGroupName": "g"}},
        "spec.schedulingPolicy: exactly one of basic and gang must be set",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", GROUP_ERRORS, ids=list(GROUP_ERRORS))
def test_a_pod_group_that_cannot_be_read_exits_2_naming_it_and_the_field(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    group, link, message = GROUP_ERRORS[case]
    spec = {k: v for k, v in link.items() if k != "annotations"}
    pods = [k8s_pod(f"w-{i}", gpus=8, annotations=link.get("annotations"), **spec) for i in range(2)]
    code, _, err = run(tmp_path, as_list(*rack_nodes(), group), as_list(*pods), capsys=capsys)
    assert code == 2
    assert message in err


def test_a_pod_group_topology_key_of_the_hostname_puts_the_group_on_one_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    group = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "default"},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": 2}},
            "schedulingConstraints": {"topology": [{"key": "kubernetes.io/hostname"}]},
        },
    }
    pods = [k8s_pod(f"w-{i}", gpus=4, schedulingGroup={"podGroupName": "pg"}) for i in range(2)]
    code, answer, err = run(tmp_path, as_list(*rack_nodes(), group), as_list(*pods), capsys=capsys)
    assert code == 0, err
    assert len({p["node"] for p in answer["pods"]}) == 1
    three = [k8s_pod(f"w-{i}", gpus=4, schedulingGroup={"podGroupName": "pg"}) for i in range(3)]
    code, answer, err = run(tmp_path, as_list(*rack_nodes(), group), as_list(*three), capsys=capsys)
    assert code == 0 and answer["partial"]  # 12 GPUs on one 8-GPU node: the minimum, 2, on one node
    assert len({p["node"] for p in answer["pods"] if p["node"]}) == 1


def test_a_kueue_and_a_kai_topology_may_share_a_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Kueue's "default" has only the block level; KAI's "default" has the rack: a KAI gang that names
    # "default" and requires a rack is laid out in KAI's.
    def topology(api: str, levels: list[str]) -> dict[str, Any]:
        return {"apiVersion": api, "kind": "Topology", "metadata": {"name": "default"},
                "spec": {"levels": [{"nodeLabel": level} for level in levels]}}  # fmt: skip

    group = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "job", "namespace": "default"},
        "spec": {"minMember": 2, "topologyConstraint": {"topology": "default", "requiredTopologyLevel": RACK}},
    }
    objects = [
        *rack_nodes(),
        topology("kueue.x-k8s.io/v1beta2", [BLOCK]),
        topology("kai.scheduler/v1alpha1", [RACK]),
        group,
    ]
    pods = [k8s_pod(f"w-{i}", gpus=8, annotations={"pod-group-name": "job"}) for i in range(2)]
    code, answer, err = run(tmp_path, as_list(*objects), as_list(*pods), capsys=capsys)
    assert code == 0, err
    assert answer["placed"] and len({rack_of(p["node"]) for p in answer["pods"]}) == 1
