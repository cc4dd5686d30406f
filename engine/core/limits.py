"""What an engine may remember and how far its set searches go: given once, when the engine is made."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

SEARCH_CAP = 20_000  # branches expanded per set search; ~0.5 s of Python at 72 devices


class ResourceWeight(msgspec.Struct, frozen=True, kw_only=True):
    """One resource NodeResourcesFit scores, and its weight (kube's scoringStrategy.resources[])."""

    name: str
    weight: Annotated[int, msgspec.Meta(ge=1, le=100)] = 1


class ShapePoint(msgspec.Struct, frozen=True, kw_only=True):
    """A point of RequestedToCapacityRatio's utilisation -> score function (score 0..10, as kube's)."""

    utilization: Annotated[int, msgspec.Meta(ge=0, le=100)]
    score: Annotated[int, msgspec.Meta(ge=0, le=10)]


class ScoringStrategy(msgspec.Struct, frozen=True, kw_only=True):
    """NodeResourcesFit's scoringStrategy, as kube-scheduler's configuration names it (default LeastAllocated,
    cpu and memory weighing 1; `shape` is read by RequestedToCapacityRatio only: default bin-packing)."""

    type: Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"] = "LeastAllocated"
    resources: tuple[ResourceWeight, ...] = (ResourceWeight(name="cpu"), ResourceWeight(name="memory"))
    shape: tuple[ShapePoint, ...] = (ShapePoint(utilization=0, score=0), ShapePoint(utilization=100, score=10))

    def __post_init__(self) -> None:
        if not self.resources:
            raise ValueError("scoring.resources: name at least one resource")
        if not self.shape:
            raise ValueError("scoring.shape: give at least one point")
        steps = [p.utilization for p in self.shape]
        if any(b <= a for a, b in zip(steps, steps[1:], strict=False)):
            raise ValueError("scoring.shape: utilization must increase from point to point")


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """An engine's limits. The defaults are the placer's; the others exist to compare paths.

    `caches`: keep answers in the engine's bounded memo tables (off: every answer computed afresh,
    the reference the tables must equal). `table_search`: answer set searches by lookup where a
    topology allows (off: the branch-and-bound alone, the reference the lookups must equal).
    `search_cap`: branches one branch-and-bound may expand before it returns the best set found
    (marked inexact). `scoring`: NodeResourcesFit's scoring strategy for pods no device vendor claims."""

    caches: bool = True
    table_search: bool = True
    search_cap: Annotated[int, msgspec.Meta(ge=1)] = SEARCH_CAP
    scoring: ScoringStrategy = ScoringStrategy()
