"""The demo's report: per-pod outcome, score, latency and trace; the summary table."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import msgspec
from rich.console import Console
from rich.table import Table

SERVICES = ("topoplace-collector", "topoplace-placer", "topoplace-binder")


class PodResult(msgspec.Struct, kw_only=True):
    name: str
    uid: str
    kind: str
    expected_to_fit: bool
    outcome: str = "pending"  # bound | unschedulable | pending (never decided)
    node: str = ""
    devices: tuple[int, ...] = ()
    score: float = 0.0
    reason: str = ""
    latency_ms: float | None = None  # submitted -> bound
    trace_id: str = ""
    trace_services: tuple[str, ...] = ()
    gang: str = ""  # "<namespace>/<group>" of a gang member
    hypernode: str = ""  # where the gang was placed (its lowest common hypernode)
    tier: int | None = None
    # How the pod's devices are enforced, read from the bound pod: "hami" (HAMi's annotations),
    # "advice" (a plain device plugin picks the GPUs), "" (not bound, or no devices)
    enforcement: str = ""
    claim_devices: tuple[str, ...] = ()  # a DRA pod's allocated devices, "driver/pool/device"


class DraSummary(msgspec.Struct, kw_only=True):
    """The DRA pool's claims as the API server holds them after the run."""

    claims_allocated: int = 0
    tainted: tuple[str, ...] = ()  # devices with a NoSchedule taint
    tainted_allocated: tuple[str, ...] = ()  # of those, any an allocated claim holds: must be none
    shared: tuple[str, ...] = ()  # devices shared by consumable capacity
    shared_holders: int = 0  # allocated claims holding a share of one


class Summary(msgspec.Struct, kw_only=True):
    pods: int
    bound: int
    unschedulable: int
    unaccounted: int
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    bound_with_full_trace_pct: float
    unexpected: int  # expected-to-fit pods that did not bind, plus never-fit pods that bound


class DemoReport(msgspec.Struct, kw_only=True):
    cluster_nodes: int
    duration_s: float
    summary: Summary
    pods: list[PodResult]
    dra: DraSummary = msgspec.field(default_factory=DraSummary)


def percentile(values: list[float], pct: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(pct) - 1]


def spans_by_trace(trace_files: Iterable[Path]) -> dict[str, set[str]]:
    """trace id -> the service names whose spans it holds, from JSON-lines trace files."""
    services: dict[str, set[str]] = {}
    for path in trace_files:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            span = json.loads(line)
            services.setdefault(span["trace_id"], set()).add(span.get("service.name", ""))
    return services


def summarize(pods: list[PodResult]) -> Summary:
    bound = [p for p in pods if p.outcome == "bound"]
    latencies = [p.latency_ms for p in bound if p.latency_ms is not None]
    full = [p for p in bound if set(SERVICES) <= set(p.trace_services)]
    unexpected = sum(
        1
        for p in pods
        if (p.expected_to_fit and p.outcome != "bound") or (not p.expected_to_fit and p.outcome == "bound")
    )
    return Summary(
        pods=len(pods),
        bound=len(bound),
        unschedulable=sum(1 for p in pods if p.outcome == "unschedulable" and p.reason),
        unaccounted=sum(
            1
            for p in pods
            if p.outcome not in ("bound", "unschedulable") or (p.outcome == "unschedulable" and not p.reason)
        ),
        latency_p50_ms=percentile(latencies, 50),
        latency_p99_ms=percentile(latencies, 99),
        bound_with_full_trace_pct=100.0 * len(full) / len(bound) if bound else 0.0,
        unexpected=unexpected,
    )


def render(report: DemoReport, console: Console) -> None:
    by_kind: dict[str, list[PodResult]] = {}
    for pod in report.pods:
        by_kind.setdefault(pod.kind, []).append(pod)
    table = Table(title="topoplace demo: outcome by workload kind")
    for column in ("kind", "pods", "bound", "unschedulable", "mean score", "p50 ms", "p99 ms", "devices enforced"):
        table.add_column(column, justify="left" if column == "kind" else "right")
    for kind in sorted(by_kind):
        pods = by_kind[kind]
        bound = [p for p in pods if p.outcome == "bound"]
        lat = [p.latency_ms for p in bound if p.latency_ms is not None]
        p50, p99 = percentile(lat, 50), percentile(lat, 99)
        table.add_row(
            kind,
            str(len(pods)),
            str(len(bound)),
            str(sum(1 for p in pods if p.outcome == "unschedulable")),
            str(round(statistics.fmean(p.score for p in bound))) if bound else "-",  # round: no "-0"
            f"{p50:.0f}" if p50 is not None else "-",
            f"{p99:.0f}" if p99 is not None else "-",
            enforced_text(bound),
        )
    console.print(table)

    gangs: dict[str, list[PodResult]] = {}
    for pod in report.pods:
        if pod.gang:
            gangs.setdefault(pod.gang, []).append(pod)
    if gangs:
        table = Table(title="gangs: all members in one network domain, or none")
        for column in ("gang", "members", "bound", "unschedulable", "hypernode", "tier"):
            table.add_column(column, justify="left" if column in ("gang", "hypernode") else "right")
        for name in sorted(gangs):
            members = gangs[name]
            placed = next((m for m in members if m.hypernode), None)
            table.add_row(
                name,
                str(len(members)),
                str(sum(1 for m in members if m.outcome == "bound")),
                str(sum(1 for m in members if m.outcome == "unschedulable")),
                placed.hypernode if placed else "-",
                str(placed.tier) if placed and placed.tier is not None else "-",
            )
        console.print(table)

    render_dra(report, console)
    reasons = Counter(p.reason for p in report.pods if p.outcome == "unschedulable")
    if reasons:
        why = Table(title="unschedulable: reasons")
        why.add_column("pods", justify="right")
        why.add_column("reason")
        for reason, n in reasons.most_common():
            why.add_row(str(n), reason)
        console.print(why)

    s = report.summary
    console.print(
        f"[bold]{s.pods} pods[/]: {s.bound} bound, {s.unschedulable} unschedulable with a reason, "
        f"{s.unaccounted} unaccounted; pending→bound p50 {fmt(s.latency_p50_ms)}, p99 {fmt(s.latency_p99_ms)}; "
        f"{s.bound_with_full_trace_pct:.1f}% of bound pods traced through all three services; "
        f"{report.cluster_nodes} nodes, {report.duration_s:.1f} s"
    )


def render_dra(report: DemoReport, console: Console) -> None:
    """The DRA pods' devices (partitions, shares, GPU + NIC), and the tainted devices nobody got."""
    claimed = [p for p in report.pods if p.claim_devices]
    if not claimed:
        return
    table = Table(title="DRA claims: the devices each pod's claims were allocated")
    for column in ("pod", "node", "devices"):
        table.add_column(column)
    for pod in sorted(claimed, key=lambda p: (p.kind, p.name)):
        table.add_row(
            pod.name, pod.node, ", ".join(d.split("/", 2)[2] + f" ({d.split('/')[0]})" for d in pod.claim_devices)
        )
    console.print(table)
    d = report.dra
    got = ", ".join(d.tainted_allocated) or "none"
    console.print(
        f"{d.claims_allocated} claims allocated; {d.shared_holders} of them share {', '.join(d.shared) or '-'}; "
        f"tainted {', '.join(d.tainted) or '-'} given to: {got}"
    )


def enforced_text(bound: list[PodResult]) -> str:
    """e.g. "hami 12, advice 30": how the bound pods' devices are enforced."""
    counts = Counter(p.enforcement for p in bound if p.enforcement)
    return ", ".join(f"{how} {n}" for how, n in sorted(counts.items())) or "-"


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def write(report: DemoReport, path: Path) -> None:
    path.write_bytes(msgspec.json.format(msgspec.json.encode(report), indent=2))
