"""`topoplace demo` as a user runs it: separate processes, every pod accounted for, traced end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from topoplace.dev.demo import cluster, dra, dra_pool, workload


@pytest.mark.e2e
def test_demo_accounts_for_every_pod_and_traces_them_through_all_services(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP"}  # the demo's own broker
    args = ["--pods", "24", "--seed", "3", "--rate", "40", "--timeout", "120"]
    paths = ["--report", "report.json", "--traces", "traces.jsonl", "--work-dir", str(tmp_path / "work")]
    result = subprocess.run(
        [sys.executable, "-m", "topoplace.cli", "demo", *args, *paths],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # the one kubectl command that shows its cluster, on a line of its own (tests/kubeapi runs it)
    shown = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith("kubectl --")]
    assert len(shown) == 1 and shown[0].startswith("kubectl --kubeconfig /dev/null --server http://127.0.0.1:")
    demo = json.loads((tmp_path / "report.json").read_text())
    summary = demo["summary"]
    pods = 24 + sum(gang.members for gang in workload.GANGS) + len(workload.dra_showcase_pods())
    assert summary["pods"] == pods and summary["unaccounted"] == 0
    assert summary["bound"] + summary["unschedulable"] == pods
    for gang in workload.GANGS:  # all or nothing, in one leaf switch when it fits
        members = [p for p in demo["pods"] if p["gang"] == f"default/{gang.name}"]
        assert len(members) == gang.members
        outcomes = {p["outcome"] for p in members}
        assert outcomes == ({"bound"} if gang.fits else {"unschedulable"}), gang.name
        if gang.fits:
            assert {(p["hypernode"], p["tier"]) for p in members} == {(members[0]["hypernode"], 1)}
    assert summary["bound_with_full_trace_pct"] >= 95.0
    bound = [p for p in demo["pods"] if p["outcome"] == "bound"]
    # a MIG partition is no GPU the node agent knows: its pod's devices are its claim's
    assert bound and all(p["node"] and (p["devices"] or p["claim_devices"]) and p["trace_id"] for p in bound)
    # the H100 pool runs HAMi: its pods carry HAMi's annotations naming our GPUs; elsewhere advice
    assert {p["enforcement"] for p in bound if p["node"].startswith("dgx-h100")} == {"hami"}
    claims = [p for p in bound if p["kind"].startswith("dra")]
    assert {p["enforcement"] for p in claims if p["devices"]} <= {"dra"}
    assert all(p["node"].startswith("pcie-8gpu") for p in claims)
    _assert_the_dra_pool_at_work(demo)
    others = [p for p in bound if not p["node"].startswith("dgx-h100") and not p["kind"].startswith("dra")]
    assert {p["enforcement"] for p in others} == {"advice"}
    assert (tmp_path / "traces.jsonl").stat().st_size > 0
    # Everything it started has stopped: no process is left whose command line names its work folder.
    assert _processes_naming(str(tmp_path)) == []


def _assert_the_dra_pool_at_work(demo: dict[str, Any]) -> None:
    """Partitions, shares, a GPU and a NIC on one root bound; the tainted GPU in no allocated claim."""
    seed = dra_pool.seed_objects(cluster.default_cluster(), "default")
    attributes = {
        dra_pool.device_id(s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"]): d["attributes"]
        for s in seed.slices
        for d in s["spec"].get("devices", [])
    }

    def attribute(device: str, name: str) -> Any:
        return next(iter(attributes[device][name].values()))

    by_kind: dict[str, list[dict[str, Any]]] = {}
    for pod in demo["pods"]:
        by_kind.setdefault(pod["kind"], []).append(pod)
    for kind, _, count in workload.DRA_SHOWCASE:
        assert [p["outcome"] for p in by_kind[kind]] == ["bound"] * count, by_kind[kind]
    partitions = [d for p in by_kind["dra-mig"] for d in p["claim_devices"]]
    assert len(set(partitions)) == len(partitions) == 2
    assert {(attribute(d, "type"), attribute(d, "profile")) for d in partitions} == {("mig", "1g.12gb")}
    assert [p["claim_devices"] for p in by_kind["dra-share"]] == [list(seed.shared)] * 2  # one GPU, two pods
    assert demo["dra"]["shared_holders"] == 2
    (pair,) = [p["claim_devices"] for p in by_kind["dra-gpu-nic"]]
    assert sorted(d.split("/")[0] for d in pair) == [dra_pool.NIC_DRIVER, dra.DRIVER]
    assert len({attribute(d, dra.PCIE_ROOT) for d in pair}) == 1
    # every allocated claim was read back: the tainted GPU is in none of them
    assert demo["dra"]["tainted"] == list(seed.tainted) and demo["dra"]["tainted_allocated"] == []
    claimed = [p for p in demo["pods"] if p["claim_devices"]]
    assert demo["dra"]["claims_allocated"] == len(claimed)
    assert not set(seed.tainted) & {d for p in claimed for d in p["claim_devices"]}


def _processes_naming(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # exited meanwhile
        if text in args:
            found.append(args)
    return found
