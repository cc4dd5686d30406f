"""kube-scheduler's volume filters through `engine place --cluster`: VolumeBinding, VolumeRestrictions, VolumeZone.

Each case is a cluster of two nodes (zone a and zone b), its storage objects, a pod mounting claims, and the
answer kube-scheduler gives (pkg/scheduler/framework/plugins/volumebinding, volumerestrictions, volumezone):
the node, each node's reasons word for word, and the message when no node fits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_cli_cluster import as_list, k8s_node, k8s_pod, reasons_of, run

ZONE = "topology.kubernetes.io/zone"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
PV_MISSING = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ZONE_CONFLICT = "node(s) had no available volume zone"
NOT_HELPFUL = "0/2 nodes are available: 2 Preemption is not helpful for scheduling."
RWOP = "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"


def nodes() -> list[dict[str, Any]]:
    return [k8s_node("a", labels={ZONE: "a"}), k8s_node("b", labels={ZONE: "b"})]


def claim(name: str, *, volume: str = "", storage_class: str | None = "local",
          modes: tuple[str, ...] = ("ReadWriteOnce",), size: str = "10Gi",
          selected_node: str = "") -> dict[str, Any]:  # fmt: skip
    spec: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if volume:
        spec["volumeName"] = volume
    annotations = {"volume.kubernetes.io/selected-node": selected_node} if selected_node else {}
    meta = {"name": name, "namespace": "default", "annotations": annotations}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def volume(name: str, *, zone: str | None = None, size: str = "10Gi", storage_class: str = "local",
           claim_ref: str = "", labels: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    spec: dict[str, Any] = {
        "capacity": {"storage": size},
        "accessModes": ["ReadWriteOnce", "ReadWriteOncePod"],
        "storageClassName": storage_class,
    }
    if zone is not None:
        term = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    if claim_ref:
        spec["claimRef"] = {"namespace": "default", "name": claim_ref}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "labels": labels or {}},
            "spec": spec}  # fmt: skip


def storage_class(name: str, *, mode: str = "WaitForFirstConsumer", provisioner: str = "csi.example.com",
                  zones: tuple[str, ...] = (), default: bool = False) -> dict[str, Any]:  # fmt: skip
    body: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}
        if default
        else {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }
    if zones:
        body["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": list(zones)}]}]
    return body


def mounting(*claims: str, name: str = "new", node: str = "") -> dict[str, Any]:
    volumes = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return k8s_pod(name, node=node, volumes=volumes)


LOCAL = storage_class("local", provisioner="kubernetes.io/no-provisioner")

# case: (storage objects, claims the pod mounts, node chosen, reasons per node, message when none)
CASES: dict[str, tuple[list[dict[str, Any]], tuple[str, ...], str | None, dict[str, list[str]], str | None]] = {
    "a bound claim goes where its volume is": (
        [LOCAL, claim("data", volume="pv-b"), volume("pv-b", zone="b", claim_ref="data")],
        ("data",), "b", {"a": [NODE_CONFLICT], "b": []}, None,
    ),
    "a claim bound to another zone's volume fits nowhere": (
        [LOCAL, claim("data", volume="pv-c"), volume("pv-c", zone="c", claim_ref="data")],
        ("data",), None, {"a": [NODE_CONFLICT], "b": [NODE_CONFLICT]},
        f"0/2 nodes are available: 2 {NODE_CONFLICT}.",
    ),
    "a missing claim fails at pre-filter": (
        [LOCAL], ("data",), None, {"a": ['persistentvolumeclaim "data" not found'],
                                   "b": ['persistentvolumeclaim "data" not found']},
        '0/2 nodes are available: persistentvolumeclaim "data" not found.',
    ),
    "an unbound claim of an Immediate class fails at pre-filter": (
        [storage_class("now", mode="Immediate"), claim("data", storage_class="now")], ("data",), None,
        {"a": ["pod has unbound immediate PersistentVolumeClaims"],
         "b": ["pod has unbound immediate PersistentVolumeClaims"]},
        "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
    ),
    "a WaitForFirstConsumer claim is provisioned where the class allows": (
        [storage_class("zonal", zones=("b",)), claim("data", storage_class="zonal")],
        ("data",), "b", {"a": [BIND_CONFLICT], "b": []}, None,
    ),
    "a WaitForFirstConsumer claim binds a local volume of its node": (
        [LOCAL, claim("data"), volume("pv-a", zone="a")], ("data",), "a", {"a": [], "b": [BIND_CONFLICT]}, None,
    ),
    "two claims never share one volume": (
        [LOCAL, claim("data"), claim("logs"), volume("pv-a", zone="a")], ("data", "logs"), None,
        {"a": [BIND_CONFLICT], "b": [BIND_CONFLICT]}, f"0/2 nodes are available: 2 {BIND_CONFLICT}.",
    ),
    "a volume too small or of another class is not a match": (
        [LOCAL, storage_class("other", provisioner="kubernetes.io/no-provisioner"), claim("data", size="20Gi"),
         volume("pv-a", zone="a"), volume("pv-b", zone="b", size="50Gi", storage_class="other")],
        ("data",), None, {"a": [BIND_CONFLICT], "b": [BIND_CONFLICT]},
        f"0/2 nodes are available: 2 {BIND_CONFLICT}.",
    ),
    "a claim with a selected node fits that node only": (
        [storage_class("zonal"), claim("data", storage_class="zonal", selected_node="a")],
        ("data",), "a", {"a": [], "b": [BIND_CONFLICT]}, None,
    ),
    "a claim with no class takes the default class": (
        [storage_class("zonal", zones=("a",), default=True), claim("data", storage_class=None)],
        ("data",), "a", {"a": [], "b": [BIND_CONFLICT]}, None,
    ),
    "a claim bound to a volume that does not exist": (
        [LOCAL, claim("data", volume="gone")], ("data",), None, {"a": [PV_MISSING], "b": [PV_MISSING]},
        f"0/2 nodes are available: 2 {PV_MISSING}.",
    ),
    "a bound volume's zone label must be the node's": (
        [LOCAL, claim("data", volume="pv"), volume("pv", claim_ref="data", labels={ZONE: "b"})],
        ("data",), "b", {"a": [ZONE_CONFLICT], "b": []}, None,
    ),
    "a zone label naming several zones": (
        [LOCAL, claim("data", volume="pv"), volume("pv", claim_ref="data", labels={ZONE: "c__a"})],
        ("data",), "a", {"a": [], "b": [ZONE_CONFLICT]}, None,
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_volume_filters_answer_as_kube_scheduler(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects, claims, node, reasons, message = CASES[case]
    code, answer, _ = run(tmp_path, as_list(*nodes(), *objects), mounting(*claims), capsys=capsys)
    assert answer["node"] == node
    assert code == (0 if node is not None else 1)
    assert reasons_of(answer) == reasons
    # kube's volume filters are unresolvable: no eviction makes room
    assert answer["reason"] == (None if message is None else f"{message} preemption: {NOT_HELPFUL}")


def test_a_read_write_once_pod_claim_in_use_fails_every_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = [
        LOCAL,
        claim("data", volume="pv", modes=("ReadWriteOncePod",)),
        volume("pv", claim_ref="data"),
        mounting("data", name="holder", node="a"),
    ]
    code, answer, _ = run(tmp_path, as_list(*nodes(), *objects), mounting("data"), capsys=capsys)
    assert code == 1 and answer["node"] is None
    assert reasons_of(answer) == {"a": [RWOP], "b": [RWOP]}
    assert answer["reason"] == f"0/2 nodes are available: {RWOP}. preemption: {NOT_HELPFUL}"
    # once the holder is gone, the claim is free
    code, answer, _ = run(tmp_path, as_list(*nodes(), *objects[:3]), mounting("data"), capsys=capsys)
    assert code == 0 and answer["node"] == "a"


def test_a_bad_claim_size_names_the_file_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, answer, err = run(tmp_path, as_list(*nodes(), LOCAL, claim("data", size="lots")), mounting("data"),
                            capsys=capsys)  # fmt: skip
    assert code == 2 and answer is None
    assert "spec.resources.requests.storage" in err
