"""Per-node device search time: the engine's bounded branch-and-bound vs exhaustive enumeration.

    python -m bench.search_speed [--quick]

For nodes of 8, 16, 64 and 72 GPUs and requests of 2, 4 and 8 GPUs it times
the engine's per-node decision, the NVIDIA search step alone (pair table +
search, cold and warm) and, in the same run, enumeration of every C(n, k) set
with the same ordering key (pair table + every set) where that is feasible,
and checks that all return the same set. The like-for-like comparison is the
cold step against the enumeration: both build the pair table and search.

Topologies: the DGX-1 V100 hybrid cube-mesh (8, the shipped fixture), a
16-GPU PCIe tree with NVLink-bridged pairs, 8 such DGX-1 boards joined across
sockets (64), and an NVL72 domain (72 GPUs, all NV18 through NVSwitch).
On nodes of 16 GPUs or more every fifth GPU is busy, so the remainder term has work to do.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from math import comb

import msgspec

from bench.results import Figure
from engine import Allocation, Engine, Limits, Mode, NodeState, PodRequest
from engine.node.registry import VendorContext
from engine.node.search import brute_force
from engine.node.vendor import NodeScratch, Unfit
from engine.node.vendors.nvidia import NvidiaPlugin, parse_nvidia_request
from engine.node.vendors.nvidia.links import pair_table
from schemas.topology import Device, Link, PcieLevel, Vendor

EXHAUSTIVE_LIMIT = 700_000  # sets; above this the exhaustive column is left empty
QUICK_EXHAUSTIVE_LIMIT = 20_000
REQUEST_SIZES = (2, 4, 8)
# The cold search step and the exhaustive enumeration it is compared with: medians of this many runs each,
# in the quick profile too (single runs of 0.05-0.1 ms flip on a loaded machine).
COLD_REPEATS = 5


class SearchFigure(msgspec.Struct, frozen=True, kw_only=True):
    """One row of the benchmark: a node shape, a request size, both timings."""

    topology: str
    devices: int
    request: int
    search_ms: float  # median wall time of the engine's whole per-node decision (the first one of an engine when quick)
    expanded: int  # branches the search expanded
    exact: bool  # the search proved its answer optimal
    sets: int  # C(free, request): what enumeration must look at
    exhaustive_ms: float | None = None  # pair table + every set (median); None: not run (too many sets)
    same_answer: bool | None = None  # the search's set == the enumeration's set
    # The vendor's search step alone (candidates given), against enumeration of the same problem:
    step_cold_ms: float = 0.0  # per-topology tables (pair scores, subset table) built afresh
    step_warm_ms: float = 0.0  # tables kept from an earlier decision on the same topology
    enumeration_ms: float | None = None  # every C(free, k) set scored on the same weights and key
    optimum_pct: float = 100.0  # the step's set score / the best set's (proven by enumeration or exactness)


def _gpu(index: int, numa: int, nvswitch: int = 0) -> Device:
    return Device(
        index=index,
        uuid=f"GPU-bench-{index:03d}",
        vendor=Vendor.NVIDIA,
        model="bench GPU",
        memory_mib=81920,
        numa_node=numa,
        nvswitch_links=nvswitch,
    )


def _both(a: int, b: int, nvlinks: int = 0, pcie: PcieLevel | None = None) -> list[Link]:
    return [Link(src=a, dst=b, nvlinks=nvlinks, pcie=pcie), Link(src=b, dst=a, nvlinks=nvlinks, pcie=pcie)]


# DGX-1 V100 hybrid cube-mesh: two fully linked quads, plus one link between each GPU i and i+4.
DGX1_NVLINKS: dict[tuple[int, int], int] = {
    (0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2,
    (1, 2): 2, (1, 3): 1, (1, 5): 2,
    (2, 3): 2, (2, 6): 1,
    (3, 7): 1,
    (4, 5): 1, (4, 6): 1, (4, 7): 2,
    (5, 6): 2, (5, 7): 1,
    (6, 7): 2,
}  # fmt: skip


def dgx1_boards(boards: int, name: str = "dgx1") -> NodeState:
    """`boards` DGX-1 cube-meshes; within a board SYS off-link, across boards SYS."""
    devices = [_gpu(b * 8 + i, numa=(b * 8 + i) // 4) for b in range(boards) for i in range(8)]
    links: list[Link] = []
    n = len(devices)
    for a in range(n):
        for c in range(a + 1, n):
            same_board = a // 8 == c // 8
            nv = DGX1_NVLINKS.get((a % 8, c % 8), 0) if same_board else 0
            links += _both(a, c, nvlinks=nv, pcie=None if nv else PcieLevel.SYS)
    return NodeState(name=name, machine_type=f"{boards}x dgx1", devices=tuple(devices), links=tuple(links))


def pcie_tree_16(name: str = "pcie16") -> NodeState:
    """16 GPUs: 2 sockets x 2 host bridges x 2 switches x 2 GPUs, each switch pair NVLink-bridged (NV4)."""
    devices = [_gpu(i, numa=i // 8) for i in range(16)]
    links: list[Link] = []
    for a in range(16):
        for c in range(a + 1, 16):
            if a // 2 == c // 2:
                links += _both(a, c, nvlinks=4, pcie=PcieLevel.PIX)
            elif a // 4 == c // 4:
                links += _both(a, c, pcie=PcieLevel.PXB)
            elif a // 8 == c // 8:
                links += _both(a, c, pcie=PcieLevel.NODE)
            else:
                links += _both(a, c, pcie=PcieLevel.SYS)
    return NodeState(name=name, machine_type="pcie-16gpu", devices=tuple(devices), links=tuple(links))


def nvl72(name: str = "nvl72") -> NodeState:
    """72 GPUs behind NVSwitch, 18 links each: every pair NV18."""
    devices = [_gpu(i, numa=i // 36, nvswitch=18) for i in range(72)]
    return NodeState(name=name, machine_type="gb200-nvl72", devices=tuple(devices))


def with_busy(node: NodeState, every: int = 5) -> NodeState:
    busy = tuple(Allocation(pod_uid=f"busy-{d.index}", index=d.index) for d in node.devices if d.index % every == 2)
    return msgspec.structs.replace(node, allocations=busy)


TOPOLOGIES: tuple[tuple[str, Callable[[], NodeState]], ...] = (
    ("dgx1-v100", lambda: dgx1_boards(1)),
    ("pcie16-nv4-bridged", pcie_tree_16),
    ("dgx1x8-cube-mesh", lambda: dgx1_boards(8)),
    ("nvl72-nvswitch", nvl72),
)


def _request(k: int) -> PodRequest:
    return PodRequest(
        uid=f"bench-{k}",
        requests={"nvidia.com/gpu": str(k)},
        annotations={"hami.io/gpu-scheduler-policy": "topology-aware"},
    )


def _exhaustive(node: NodeState, k: int) -> tuple[tuple[int, ...], float]:
    """Every set of k free GPUs, ranked by the same key as the engine's default mode."""
    held = {a.index for a in node.allocations}
    free = [d for d in node.devices if d.index not in held]
    links = {(link.src, link.dst): link for link in node.links}
    started = time.perf_counter()
    table = pair_table(list(node.devices), links)
    pos = [table.position(d.index) for d in free]
    weights = [[table.scores[p][q] for q in pos] for p in pos]
    degree = [sum(weights[x][y] for y in range(len(free)) if y != x) for x in range(len(free))]
    best = brute_force(weights, k, cut_degree=degree, idle=[True] * len(free))
    elapsed = time.perf_counter() - started
    return tuple(free[p].index for p in best.positions), elapsed * 1000


def _step(node: NodeState, k: int, repeats: int) -> tuple[float, float, float]:
    """Median ms of the NVIDIA search step, cold and warm, and the chosen set's score."""
    claimed = parse_nvidia_request(_request(k))
    assert claimed is not None
    cold_plugin = NvidiaPlugin(VendorContext.fresh(Limits(caches=False)))
    warm_plugin = NvidiaPlugin(VendorContext.fresh())
    held = {a.index for a in node.allocations}
    candidates = tuple(d for d in sorted(node.devices, key=lambda d: d.index) if d.index not in held)

    def once(plugin: NvidiaPlugin) -> tuple[float, float]:
        scratch = NodeScratch.build(node, Mode.DEFAULT)
        started = time.perf_counter()
        choice = plugin.search(scratch, claimed, candidates)
        elapsed = (time.perf_counter() - started) * 1000
        assert not isinstance(choice, Unfit)
        return elapsed, choice.set_score

    cold = [once(cold_plugin) for _ in range(repeats)]
    once(warm_plugin)  # builds the tables the warm runs reuse
    warm = [once(warm_plugin) for _ in range(max(repeats, 20))]
    return statistics.median(t for t, _ in cold), statistics.median(t for t, _ in warm), warm[0][1]


def _enumeration(node: NodeState, k: int) -> tuple[float, float]:
    """ms to score every set of k free GPUs on the search step's weights and key; the best score."""
    held = {a.index for a in node.allocations}
    free = [d for d in sorted(node.devices, key=lambda d: d.index) if d.index not in held]
    table = pair_table(sorted(node.devices, key=lambda d: d.index), {(lk.src, lk.dst): lk for lk in node.links})
    pos = [table.position(d.index) for d in free]
    weights = [[table.scores[p][q] for q in pos] for p in pos]
    degree = [sum(weights[x][y] for y in range(len(free)) if y != x) for x in range(len(free))]
    started = time.perf_counter()
    best = brute_force(weights, k, cut_degree=degree, idle=[True] * len(free))
    return (time.perf_counter() - started) * 1000, float(best.internal)


def measure(label: str, node: NodeState, k: int, repeats: int, exhaustive_limit: int) -> SearchFigure:
    request = _request(k)
    times = []
    choice = None
    placer = Engine()
    for _ in range(repeats):
        started = time.perf_counter()
        choice = placer.choose_devices(node, request, Mode.DEFAULT)
        times.append((time.perf_counter() - started) * 1000)
    assert choice is not None
    free = len(node.devices) - len(node.allocations)
    sets = comb(free, k)
    exhaustive_ms: float | None = None
    same: bool | None = None
    cold_ms, warm_ms, step_score = _step(node, k, max(repeats, COLD_REPEATS))
    enumeration_ms: float | None = None
    optimum = choice.score if choice.score_parts.get("exact", 1.0) == 1.0 else None
    if sets <= exhaustive_limit:
        timed = [_exhaustive(node, k) for _ in range(max(repeats, COLD_REPEATS))]
        devices, exhaustive_ms = timed[0][0], statistics.median(ms for _, ms in timed)
        same = devices == choice.devices
        enumeration_ms, optimum = _enumeration(node, k)
    return SearchFigure(
        topology=label,
        devices=len(node.devices),
        request=k,
        search_ms=round(statistics.median(times), 3),
        expanded=int(choice.score_parts.get("branches", 0)),
        exact=choice.score_parts.get("exact", 1.0) == 1.0,
        sets=sets,
        exhaustive_ms=round(exhaustive_ms, 3) if exhaustive_ms is not None else None,
        same_answer=same,
        step_cold_ms=round(cold_ms, 4),
        step_warm_ms=round(warm_ms, 4),
        enumeration_ms=round(enumeration_ms, 4) if enumeration_ms is not None else None,
        optimum_pct=round(100.0 * step_score / optimum, 3) if optimum else 100.0,
    )


def speedup_figures(figures: Sequence[SearchFigure]) -> list[Figure]:
    """`search.speedup_vs_exhaustive.<devices>`: enumeration time / warm search step, at the largest request
    measured (the smallest ratio of every request size is in `detail`); per request size as `.k<k>`."""
    out: list[Figure] = []
    for devices in sorted({f.devices for f in figures}):
        rows = [f for f in figures if f.devices == devices and f.enumeration_ms is not None and f.step_warm_ms > 0]
        if not rows:
            continue
        ratios = {f.request: f.enumeration_ms / f.step_warm_ms for f in rows if f.enumeration_ms is not None}
        cold = {f.request: f.enumeration_ms / f.step_cold_ms for f in rows if f.enumeration_ms and f.step_cold_ms}
        detail = "; ".join(f"k={k}: warm x{ratios[k]:.1f}, cold x{cold.get(k, 0.0):.1f}" for k in sorted(ratios))
        top = max(ratios)
        out.append(
            Figure(
                name=f"search.speedup_vs_exhaustive.{devices}",
                value=round(ratios[top], 2),
                unit="x",
                baselines={f"cold.k{top}": round(cold.get(top, 0.0), 2)},
                detail=f"k={top}, {rows[0].topology}; {detail}",
            )
        )
        for k, ratio in sorted(ratios.items()):
            out.append(
                Figure(
                    name=f"search.speedup_vs_exhaustive.{devices}.k{k}",
                    value=round(ratio, 2),
                    unit="x",
                    baselines={"cold": round(cold.get(k, 0.0), 2)},
                )
            )
    for f in figures:
        out.append(
            Figure(
                name=f"search.step_warm_ms.{f.topology}.{f.devices}dev.k{f.request}",
                value=f.step_warm_ms,
                unit="ms",
                baselines={"cold": f.step_cold_ms, **({"enumeration": f.enumeration_ms} if f.enumeration_ms else {})},
                detail=f"set score {f.optimum_pct}% of the optimum",
            )
        )
    return out


def _warm_up() -> None:
    """One decision and one enumeration on a throwaway node first: the first row would otherwise pay the
    interpreter's first calls into both (the columns compare searches, not imports)."""
    node = dgx1_boards(1, name="warm-up")
    Engine().choose_devices(node, _request(2), Mode.DEFAULT)
    _exhaustive(node, 2)


def run(quick: bool) -> list[SearchFigure]:
    repeats = 1 if quick else 5
    limit = QUICK_EXHAUSTIVE_LIMIT if quick else EXHAUSTIVE_LIMIT
    _warm_up()
    figures = []
    for label, build in TOPOLOGIES:
        node = build()
        if len(node.devices) >= 16:  # an 8-GPU box must stay whole to take an 8-GPU request
            node = with_busy(node)
        for k in REQUEST_SIZES:
            figures.append(measure(label, node, k, repeats, limit))
    return figures


def _print(figures: list[SearchFigure]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="per-node device search: branch-and-bound vs exhaustive (same run)")
    columns = ("topology", "GPUs", "k", "search ms", "branches", "exact", "C(free,k)", "exhaustive ms", "same")
    for column in (*columns, "step cold ms", "step warm ms", "enum ms", "x warm", "% opt"):
        table.add_column(column, justify="right")
    for f in figures:
        table.add_row(
            f.topology,
            str(f.devices),
            str(f.request),
            f"{f.search_ms:.2f}",
            str(f.expanded),
            "yes" if f.exact else "NO",
            f"{f.sets:,}",
            f"{f.exhaustive_ms:.1f}" if f.exhaustive_ms is not None else "-",
            {True: "yes", False: "NO", None: "-"}[f.same_answer],
            f"{f.step_cold_ms:.3f}",
            f"{f.step_warm_ms:.3f}",
            f"{f.enumeration_ms:.2f}" if f.enumeration_ms is not None else "-",
            f"{f.enumeration_ms / f.step_warm_ms:.0f}" if f.enumeration_ms and f.step_warm_ms else "-",
            f"{f.optimum_pct:.1f}",
        )
    Console(width=200).print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one repeat, exhaustive only up to 20k sets")
    _print(run(parser.parse_args().quick))


if __name__ == "__main__":
    main()
