"""kube-scheduler's NodeVolumeLimits (CSI): a node's CSINode attach limit per driver against the volumes its
pods use and the pod's new ones (nodevolumelimits/csi_test.go's cases), through the engine's filter and
through `engine place --cluster` (CSINodes, PersistentVolumes' `spec.csi`, running pods' claims).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_cli_cluster import as_list, k8s_node, reasons_of, run
from test_kube_volumes import claim, mounting, storage_class, volume

from engine.decide.kube.filters import CompiledPodRules, NodeFacts, PodFacts
from engine.decide.kube.volume_limits import MAX_VOLUME_COUNT_REASON, exceeds_volume_limits
from schemas.volumes import CsiVolume, PersistentVolume, VolumeRules

EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"


def ebs(handle: str, driver: str = EBS) -> CsiVolume:
    return CsiVolume(driver=driver, handle=handle)


# (the pod's volumes, attached on the node, the node's limits, exceeds)
TABLE = [
    pytest.param((ebs("v1"),), (), {EBS: 1}, False, id="one new volume, limit 1"),
    pytest.param((ebs("v1"), ebs("v2")), (), {EBS: 1}, True, id="two new volumes, limit 1"),
    pytest.param((ebs("v2"),), (ebs("v1"),), {EBS: 1}, True, id="one attached, one new, limit 1"),
    pytest.param((ebs("v1"),), (ebs("v1"),), {EBS: 1}, False, id="the volume is already attached: not new"),
    pytest.param((ebs("v1"), ebs("v1")), (), {EBS: 1}, False, id="one volume used twice counts once"),
    pytest.param((ebs("v2"),), (ebs("v1"), ebs("x", GCE)), {EBS: 2, GCE: 1}, False, id="per driver"),
    pytest.param((ebs("g2", GCE),), (ebs("g1", GCE),), {EBS: 5, GCE: 1}, True, id="the other driver's limit"),
    pytest.param((ebs("v2"),), (ebs("v1"),), {GCE: 1}, False, id="a driver without a limit"),
    pytest.param((ebs("v2"),), (ebs("v1"),), None, False, id="a node without a CSINode"),
    pytest.param((), (ebs("v1"), ebs("v2")), {EBS: 1}, False, id="a pod without volumes"),
    pytest.param((ebs("v1"),), (), {EBS: 0}, True, id="limit 0"),
]


@pytest.mark.parametrize(("new", "attached", "limits", "exceeds"), TABLE)
def test_volume_limits_as_kube_counts_them(
    new: tuple[CsiVolume, ...], attached: tuple[CsiVolume, ...], limits: dict[str, int] | None, exceeds: bool
) -> None:
    assert exceeds_volume_limits(new, attached, limits) is exceeds


def test_node_volume_limits_runs_after_resources_and_before_volume_binding() -> None:
    zoned = PersistentVolume(name="pv", node_terms=(), csi=ebs("v2"))
    rules = CompiledPodRules(PodFacts(volumes=VolumeRules(bound=(zoned,), csi=(ebs("v2"),))))
    full = NodeFacts(name="n", csi_volume_limits={EBS: 1}, csi_volumes=(ebs("v1"),))
    assert rules.failed_step(full) == ("NodeVolumeLimits", [MAX_VOLUME_COUNT_REASON])
    roomy = NodeFacts(name="n", csi_volume_limits={EBS: 2}, csi_volumes=(ebs("v1"),))
    assert rules.failed_step(roomy) is None
    starved = NodeFacts(name="n", allocatable={}, csi_volume_limits={EBS: 1}, csi_volumes=(ebs("v1"),))
    assert rules.failed_step(starved) == ("NodeResourcesFit", ["Too many pods"])


def csi_node(name: str, **counts: int) -> dict[str, Any]:
    drivers = [{"name": d.replace("_", "."), "nodeID": name, "allocatable": {"count": c}} for d, c in counts.items()]
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": drivers},
    }


def csi_volume(name: str, handle: str, claim_ref: str = "") -> dict[str, Any]:
    body = volume(name, storage_class="ebs", claim_ref=claim_ref)
    body["spec"]["csi"] = {"driver": EBS, "volumeHandle": handle}
    return body


EBS_CLASS = storage_class("ebs", provisioner=EBS)
LIMIT_ONE = {"ebs_csi_aws_com": 1}


def storage(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        EBS_CLASS,
        claim("old", volume="pv-old", storage_class="ebs"),
        csi_volume("pv-old", "vol-old", claim_ref="old"),
        claim("new", volume="pv-new", storage_class="ebs"),
        csi_volume("pv-new", "vol-new", claim_ref="new"),
        *extra,
    ]


def test_a_node_at_its_attach_limit_is_refused_with_kubes_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = as_list(
        k8s_node("a"), k8s_node("b"), csi_node("a", **LIMIT_ONE), csi_node("b", ebs_csi_aws_com=2),
        mounting("old", name="runs-on-a", node="a"), mounting("old", name="runs-on-b", node="b"), *storage(),
    )  # fmt: skip
    code, answer, _ = run(tmp_path, cluster, mounting("new"), capsys=capsys)
    assert code == 0
    assert answer["node"] == "b"
    assert reasons_of(answer) == {"a": [MAX_VOLUME_COUNT_REASON], "b": []}


def test_a_volume_already_attached_and_an_unbound_claim(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = [k8s_node("a"), csi_node("a", **LIMIT_ONE), mounting("old", name="runs", node="a")]
    # the same volume as the running pod's: attached already, not new
    code, answer, _ = run(tmp_path, as_list(*base, *storage()), mounting("old", name="second"), capsys=capsys)
    assert (code, answer["node"]) == (0, "a")
    # a WaitForFirstConsumer claim of the ebs class: a new volume of its provisioner
    wait = claim("later", storage_class="ebs")
    code, answer, _ = run(tmp_path, as_list(*base, *storage(wait)), mounting("later"), capsys=capsys)
    assert code == 1
    assert reasons_of(answer) == {"a": [MAX_VOLUME_COUNT_REASON]}
    # Unschedulable, not UnschedulableAndUnresolvable: preemption is tried (the running pod is no lower)
    assert answer["reason"].startswith(f"0/1 nodes are available: 1 {MAX_VOLUME_COUNT_REASON}. preemption: ")


def test_a_bad_csinode_count_exits_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = as_list(k8s_node("a"), csi_node("a", ebs_csi_aws_com=-1), *storage())
    code, answer, err = run(tmp_path, cluster, mounting("new"), capsys=capsys)
    assert code == 2 and answer is None
    assert "spec.drivers[0].allocatable.count" in err
