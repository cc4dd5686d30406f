"""DRA allocation speed: the structured allocator (engine/node/dra) on claims as large as a node holds.

Three cases, each timed warm (selectors compiled once in the caller's CelPrograms, as the placer
keeps them in its Engine's memo), ROUNDS allocations after WARMUP:

- `gpus8`: 8 GPUs of a 72-GPU node (an NVL72 rack's worth: 18 trays of 4, each tray its own
  PCIe root, 9 NVLink cliques of 8) with a CEL selector (product and memory) and
  `matchAttribute` on the clique; 29 GPUs already held by other claims, so that only the last
  clique can serve. Topology
  leads (the score hook keeps going past the first solution, up to MAX_SOLUTIONS);
- `mig4`: a 4-request claim (1g, 1g, 2g, 3g MIG partitions) with `distinctAttribute` on the
  parent GPU, on an 8-GPU node whose partitions consume the GPUs' shared counters;
- `no_solution`: 11 devices with two distinctAttributes where no 11 exist (a matching of at
  most 10): the search stops at MAX_STEPS with an AllocationError, its time is the bound.

The baselines of each timed case, in the same run: upstream's search (the first solution
stands: no score), and the same call with its selectors compiled anew each time (the placer
before it kept them in its Engine). `no_solution` has none: its figure is the time to the error.
`mig4` has no topology to lead (its devices are unknown to a node agent): it is allocated as
the placer allocates it, first solution.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import msgspec

from bench.results import Figure
from engine.node.dra import (
    MAX_STEPS,
    AllocationError,
    AllocationInput,
    CelPrograms,
    DeviceClass,
    DeviceId,
    NodeView,
    ResourceClaim,
    ResourceSlice,
    allocate,
)

DRIVER = "gpu.example.com"
NODE = NodeView(name="nvl72-0")
WARMUP, ROUNDS = 20, 300
GOAL_MS = 5.0


class CaseTiming(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    p50_ms: float
    p99_ms: float
    first: tuple[float, float] | None = None  # upstream's first solution: p50, p99
    cold: tuple[float, float] | None = None  # selectors compiled at each call: p50, p99
    rounds: int = 0
    error: str = ""  # the no-solution case: the error it ended with


def _attrs(**values: Any) -> dict[str, Any]:
    return {k: {"int": v} if isinstance(v, int) else {"string": v} for k, v in values.items()}


def _slice(devices: list[dict[str, Any]], **spec: Any) -> ResourceSlice:
    body = {
        "metadata": {"name": f"{NODE.name}-{DRIVER}"},
        "spec": {"driver": DRIVER, "pool": {"name": NODE.name, "generation": 1}, "nodeName": NODE.name}
        | {"devices": devices, **spec},
    }
    return msgspec.convert(body, ResourceSlice)


def _class() -> dict[str, DeviceClass]:
    body = {
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }
    return {"gpu": msgspec.convert(body, DeviceClass)}


def _claim(requests: list[dict[str, Any]], constraints: list[dict[str, Any]]) -> ResourceClaim:
    body = {
        "metadata": {"name": "bench", "namespace": "default", "uid": "bench"},
        "spec": {"devices": {"requests": requests, "constraints": constraints}},
    }
    return msgspec.convert(body, ResourceClaim)


def gpus8_case() -> tuple[ResourceClaim, AllocationInput, Callable[[list[DeviceId]], float]]:
    devices: list[dict[str, Any]] = [
        {
            "name": f"gpu-{i}",
            "attributes": _attrs(productName="GB200", clique=f"clique-{i // 8}", pcieRoot=f"pci-{i // 4}"),
            "capacity": {"memory": {"value": "186Gi"}},
        }
        for i in range(72)
    ]
    # cliques 0-2 held whole, one GPU of each of cliques 3-7: only clique 8 can serve, found past the others
    held = frozenset((DRIVER, NODE.name, f"gpu-{i}") for i in [*range(24), *range(24, 64, 8)])
    selector = (
        f'device.attributes["{DRIVER}"].productName == "GB200" && '
        f'device.capacity["{DRIVER}"].memory.compareTo(quantity("180Gi")) >= 0'
    )
    exactly = {"deviceClassName": "gpu", "count": 8, "selectors": [{"cel": {"expression": selector}}]}
    claim = _claim([{"name": "gpus", "exactly": exactly}], [{"matchAttribute": f"{DRIVER}/clique"}])
    roots = {(DRIVER, NODE.name, d["name"]): d["attributes"]["pcieRoot"]["string"] for d in devices}

    def same_root_pairs(chosen: list[DeviceId]) -> float:  # a stand-in for the link score: trays kept whole
        return float(sum(1 for i, a in enumerate(chosen) for b in chosen[i + 1 :] if roots[a] == roots[b]))

    given = AllocationInput(slices=(_slice(devices),), classes=_class(), allocated=held)
    return claim, given, same_root_pairs


def _profile_is(profile: str) -> str:
    return f'device.attributes["{DRIVER}"].profile == "{profile}"'


def mig4_case() -> tuple[ResourceClaim, AllocationInput]:
    profiles = (("1g", 1, 7), ("2g", 2, 3), ("3g", 3, 2), ("7g", 7, 1))  # (profile, slices used, how many)
    counters = [{"name": f"gpu-{g}", "counters": {"slices": {"value": "7"}}} for g in range(8)]
    devices = []
    for g in range(8):
        for profile, used, count in profiles:
            for k in range(count):
                devices.append(
                    {
                        "name": f"gpu-{g}-{profile}-{k}",
                        "attributes": _attrs(profile=profile, parent=f"gpu-{g}"),
                        "consumesCounters": [{"counterSet": f"gpu-{g}", "counters": {"slices": {"value": str(used)}}}],
                    }
                )
    requests = [
        {"name": f"r{i}", "exactly": {"deviceClassName": "gpu", "selectors": [{"cel": {"expression": _profile_is(p)}}]}}
        for i, p in enumerate(("1g", "1g", "2g", "3g"))
    ]
    claim = _claim(requests, [{"distinctAttribute": f"{DRIVER}/parent"}])
    given = AllocationInput(slices=(_slice(devices, sharedCounters=counters),), classes=_class())
    return claim, given


def no_solution_case() -> tuple[ResourceClaim, AllocationInput]:
    pairs = [(a, b) for a in range(5) for b in range(5, 14)] + [(a, b) for a in range(5, 14) for b in range(5)]
    devices = [{"name": f"d{i}", "attributes": _attrs(a=a, b=b)} for i, (a, b) in enumerate(pairs)]
    constraints = [{"distinctAttribute": f"{DRIVER}/a"}, {"distinctAttribute": f"{DRIVER}/b"}]
    claim = _claim([{"name": "req", "exactly": {"deviceClassName": "gpu", "count": 11}}], constraints)
    return claim, AllocationInput(slices=(_slice(devices),), classes=_class())


def _timed(call: Callable[[], object], rounds: int = ROUNDS) -> tuple[float, float]:
    """p50 and p99 in ms of `rounds` calls after WARMUP."""
    for _ in range(WARMUP):
        call()
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def run(rounds: int = ROUNDS) -> list[CaseTiming]:
    programs = CelPrograms()
    out = []
    claim, given, score = gpus8_case()
    assert allocate(NODE, [claim], given, programs, score=score) is not None
    out.append(_case("gpus8", claim, given, programs, score, rounds))
    mig, mig_given = mig4_case()
    assert allocate(NODE, [mig], mig_given, programs) is not None
    out.append(_case("mig4", mig, mig_given, programs, None, rounds))
    out.append(_no_solution(programs))
    return out


def _case(
    name: str,
    claim: ResourceClaim,
    given: AllocationInput,
    programs: CelPrograms,
    score: Callable[[list[DeviceId]], float] | None,
    rounds: int,
) -> CaseTiming:
    """Warm as the placer allocates (its Engine's compiled selectors; the score where topology leads);
    baselines: upstream's first solution (warm, no score), and selectors compiled anew at each call
    (as the placer did before it kept them)."""
    p50, p99 = _timed(lambda: allocate(NODE, [claim], given, programs, score=score), rounds)
    first = _timed(lambda: allocate(NODE, [claim], given, programs), rounds)
    cold = _timed(lambda: allocate(NODE, [claim], given, CelPrograms(), score=score), max(rounds // 10, 10))
    return CaseTiming(name=name, p50_ms=p50, p99_ms=p99, first=first, cold=cold, rounds=rounds)


def _no_solution(programs: CelPrograms) -> CaseTiming:
    claim, given = no_solution_case()
    started = time.perf_counter()
    try:
        allocate(NODE, [claim], given, programs)
    except AllocationError as exc:
        ms = (time.perf_counter() - started) * 1000
        return CaseTiming(name="no_solution", p50_ms=ms, p99_ms=ms, error=str(exc))
    raise AssertionError("the no-solution case found a solution")


def figures(timings: list[CaseTiming]) -> list[Figure]:
    """`dra.<case>.p99_ms` (baselines: upstream's first-solution search, selectors compiled at each
    call), `dra.no_solution.ms` (the time to the bounded search's error)."""
    out = []
    for t in timings:
        if t.first is None or t.cold is None:
            detail = f"11 of 126 devices under two distinctAttributes, no solution; ended with: {t.error}"
            out.append(Figure(name="dra.no_solution.ms", value=round(t.p99_ms, 1), unit="ms", detail=detail))
            continue
        baselines = {"upstream_first_solution": round(t.first[1], 3), "cold_selectors": round(t.cold[1], 3)}
        detail = f"p50 {t.p50_ms:.3f} ms, warm, {t.rounds} rounds; goal p99 <= {GOAL_MS:g} ms (bench/dra_speed.py)"
        figure = Figure(name=f"dra.{t.name}.p99_ms", value=round(t.p99_ms, 3), unit="ms", baselines=baselines)
        out.append(msgspec.structs.replace(figure, detail=detail))
    return out


def markdown(timings: list[CaseTiming]) -> str:
    lines = [
        f"Warm, {timings[0].rounds} allocations after {WARMUP} (bench/dra_speed.py); "
        f"the search is bounded at {MAX_STEPS} steps. Goal: p99 <= {GOAL_MS:g} ms.",
        "",
        "| case | p50 ms | p99 ms | upstream's first solution p50 / p99 | selectors compiled per call p50 / p99 |",
        "|---|---|---|---|---|",
    ]
    for t in timings:
        first = "-" if t.first is None else f"{t.first[0]:.3f} / {t.first[1]:.3f}"
        cold = "-" if t.cold is None else f"{t.cold[0]:.3f} / {t.cold[1]:.3f}"
        lines.append(f"| {t.name} | {t.p50_ms:.3f} | {t.p99_ms:.3f} | {first} | {cold} |")
    error = next((t.error for t in timings if t.error), "")
    if error:
        lines += ["", f"The no-solution case ended with: `{error}`"]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(run()))
