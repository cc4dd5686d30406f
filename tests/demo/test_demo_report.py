"""The demo's report: outcome counts, latency percentiles, trace coverage, exit rule inputs."""

from __future__ import annotations

import io
import json
from pathlib import Path

import msgspec
from rich.console import Console

from topoplace.dev.demo import report
from topoplace.dev.demo.report import PodResult


def pod(name: str, outcome: str, *, latency: float | None = None, reason: str = "", trace: tuple[str, ...] = (),
        fits: bool = True) -> PodResult:  # fmt: skip
    return PodResult(
        name=name, uid=f"u-{name}", kind="k", expected_to_fit=fits, outcome=outcome,
        latency_ms=latency, reason=reason, trace_services=trace,
    )  # fmt: skip


ALL = report.SERVICES


def test_summary_counts_every_pod_once_and_flags_the_unaccounted() -> None:
    pods = [
        pod("a", "bound", latency=10.0, trace=ALL),
        pod("b", "bound", latency=30.0, trace=ALL[:2]),
        pod("c", "unschedulable", reason="0/3 nodes are available", fits=False),
        pod("d", "unschedulable"),  # no reason: not accounted for
        pod("e", "pending"),
    ]
    s = report.summarize(pods)
    assert (s.pods, s.bound, s.unschedulable, s.unaccounted) == (5, 2, 1, 2)
    assert s.bound_with_full_trace_pct == 50.0
    assert s.unexpected == 2  # d and e were expected to fit and did not bind
    assert s.latency_p50_ms == 20.0


def test_percentiles_follow_the_inclusive_definition() -> None:
    values = [float(v) for v in range(1, 101)]
    assert report.percentile(values, 50) == 50.5
    assert report.percentile(values, 99) == 99.01
    assert report.percentile([7.0], 99) == 7.0
    assert report.percentile([], 50) is None


def test_spans_by_trace_reads_the_services_of_each_trace(tmp_path: Path) -> None:
    lines = [
        {"trace_id": "t1", "service.name": "topoplace-collector"},
        {"trace_id": "t1", "service.name": "topoplace-binder"},
        {"trace_id": "t2", "service.name": "topoplace-placer"},
    ]
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    assert report.spans_by_trace([path, tmp_path / "missing.jsonl"]) == {
        "t1": {"topoplace-collector", "topoplace-binder"},
        "t2": {"topoplace-placer"},
    }


def test_render_shows_the_kinds_the_reasons_and_the_summary(tmp_path: Path) -> None:
    pods = [pod("a", "bound", latency=12.0, trace=ALL), pod("c", "unschedulable", reason="too big", fits=False)]
    demo = report.DemoReport(cluster_nodes=3, duration_s=1.0, summary=report.summarize(pods), pods=pods)
    out = io.StringIO()
    report.render(demo, Console(file=out, width=200))
    text = out.getvalue()
    assert "too big" in text and "2 pods" in text and "1 bound" in text
    report.write(demo, tmp_path / "r.json")
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["bound"] == 1


def test_each_pod_says_how_its_devices_are_enforced() -> None:
    from schemas import hami
    from schemas.events import DeviceAssignment
    from topoplace.dev.demo.cluster import default_cluster, node_manifest
    from topoplace.dev.demo.report import PodResult, enforced_text
    from topoplace.dev.demo.runner import enforcement_of

    pools = {node_manifest(n)["metadata"]["labels"]["topoplace.io/enforcement"] for n in default_cluster().nodes}
    assert pools == {"hami", "dra", "device-plugin"}
    ours = (DeviceAssignment(index=0, uuid="GPU-a"), DeviceAssignment(index=1, uuid="GPU-b"))
    allocated = {hami.DEVICES_ALLOCATED: "GPU-a,NVIDIA,81920,100:GPU-b,NVIDIA,81920,100:;"}
    assert enforcement_of(allocated, ours) == "hami"
    assert enforcement_of(allocated, ours[:1]) == "hami (devices differ)"
    assert enforcement_of({}, ours) == "advice"
    pods = [PodResult(name=str(i), uid=str(i), kind="k", expected_to_fit=True, enforcement=e)
            for i, e in enumerate(["hami", "advice", "advice", ""])]  # fmt: skip
    assert enforced_text(pods) == "advice 2, hami 1"


def test_render_lists_each_dra_pods_claim_devices_and_who_holds_the_tainted_one() -> None:
    mig = pod("mig", "bound")
    mig.node, mig.claim_devices = "n1", ("gpu.nvidia.com/n1/gpu-0-mig-1g-12gb-0",)
    dra = report.DraSummary(
        claims_allocated=1,
        tainted=("gpu.nvidia.com/n0/gpu-0",),
        shared=("gpu.nvidia.com/n0/gpu-7",),
    )
    demo = report.DemoReport(cluster_nodes=2, duration_s=1.0, summary=report.summarize([mig]), pods=[mig], dra=dra)
    out = io.StringIO()
    report.render(demo, Console(file=out, width=200))
    text = out.getvalue()
    assert "gpu-0-mig-1g-12gb-0 (gpu.nvidia.com)" in text
    assert (
        "1 claims allocated; 0 of them share gpu.nvidia.com/n0/gpu-7; tainted gpu.nvidia.com/n0/gpu-0 given to: none"
        in text
    )
    assert json.loads(msgspec.json.encode(demo))["dra"]["tainted_allocated"] == []
