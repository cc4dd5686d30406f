"""kube-scheduler's resource scores: NodeResourcesFit's scoring strategies and NodeResourcesBalancedAllocation.

Each scores a node 0..100 with kube's integer arithmetic (noderesources/least_allocated.go,
most_allocated.go, requested_to_capacity_ratio.go, balanced_allocation.go, resource_allocation.go):

- per resource of the strategy, allocatable and requested = the node's requests + the pod's; a resource
  the node does not report (allocatable 0) is left out, and so is a scalar resource (extended, hugepages,
  ...) the pod does not ask for;
- NodeResourcesFit reads cpu and memory with kube's scoring defaults: a pod that asks for no cpu counts
  100m, none of memory 200 MiB, and the node's pods likewise (`NodeState.nonzero_requested`);
  BalancedAllocation reads the requests as they are, and does not score a pod that asks for nothing;
- LeastAllocated: (capacity - requested) * 100 / capacity (0 when over); MostAllocated: requested * 100
  / capacity (requested capped at capacity); both weighted means, truncated;
  RequestedToCapacityRatio: the shape's broken-linear function of requested * 100 / capacity (the
  shape's scores, 0..10, times 10), a weighted mean of the resources that score above 0, rounded;
- BalancedAllocation: 100 * (1 - the standard deviation of the requested / allocatable fractions, each
  at most 1), truncated (two resources: |f1 - f2| / 2).

Amounts are milli-units (resources.py): every ratio is the same as kube's on its units. kube applies its
defaults per container; the engine knows the pod's summed request, so a pod counts the default for a
resource none of its containers asks for (one with two containers, one asking and one not, counts less
than kube by the default).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from engine.core.limits import ScoringStrategy, ShapePoint
from engine.decide.kube.resources import CPU, EPHEMERAL_STORAGE, MEMORY, is_scalar_resource

MAX_NODE_SCORE = 100
MAX_CUSTOM_PRIORITY_SCORE = 10  # the top of a RequestedToCapacityRatio shape's scores
MAX_UTILIZATION = 100
DEFAULT_MILLI_CPU = 100  # kube's scoring default for a pod that asks no cpu (milli-CPU)
DEFAULT_MEMORY_MILLI = 200 * 1024 * 1024 * 1000  # ... and no memory: 200 MiB, in milli-bytes
BALANCED_RESOURCES = (CPU, MEMORY)  # NodeResourcesBalancedAllocationArgs' default resources

Amounts = Mapping[str, int]


def nonzero_request(request: Amounts) -> dict[str, int]:
    """The pod's request as NodeResourcesFit scores it: cpu and memory at kube's defaults when not asked
    (asked as 0, they stay 0, as kube's are for a container that sets them)."""
    out = dict(request)
    out.setdefault(CPU, DEFAULT_MILLI_CPU)
    out.setdefault(MEMORY, DEFAULT_MEMORY_MILLI)
    return out


def _go_div(a: int, b: int) -> int:
    """Go's integer division (truncates towards zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def allocatable_and_requested(
    resource: str, pod: Amounts, allocatable: Amounts, requested: Amounts, scored_requested: Amounts
) -> tuple[int, int]:
    """kube's calculateResourceAllocatableRequest: (allocatable, node's + pod's request); (0, 0): not scored.
    `scored_requested` is the node's requests as this plugin reads cpu and memory."""
    asked = pod.get(resource, 0)
    if asked == 0 and is_scalar_resource(resource):
        return 0, 0
    if resource in (CPU, MEMORY):
        return allocatable.get(resource, 0), scored_requested.get(resource, 0) + asked
    if resource == EPHEMERAL_STORAGE or resource in allocatable:
        return allocatable.get(resource, 0), requested.get(resource, 0) + asked
    return 0, 0


def least_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def most_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


def broken_linear(shape: Sequence[ShapePoint], utilization: int) -> int:
    """kube's BuildBrokenLinearFunction over the shape, its scores scaled to 0..100."""
    scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    points = [(p.utilization, p.score * scale) for p in shape]
    for i, (at, score) in enumerate(points):
        if utilization <= at:
            if i == 0:
                return score
            before_at, before = points[i - 1]
            return before + _go_div((score - before) * (utilization - before_at), at - before_at)
    return points[-1][1]


def fit_score(
    strategy: ScoringStrategy, pod: Amounts, allocatable: Amounts, requested: Amounts, nonzero: Amounts
) -> int:
    """NodeResourcesFit's score of the node (0..100); `pod` is the pod's non-zero request."""
    total = weights = 0
    ratio = strategy.type == "RequestedToCapacityRatio"
    for resource in strategy.resources:
        capacity, asked = allocatable_and_requested(resource.name, pod, allocatable, requested, nonzero)
        if capacity == 0:
            continue
        if strategy.type == "LeastAllocated":
            score = least_requested_score(asked, capacity)
        elif strategy.type == "MostAllocated":
            score = most_requested_score(asked, capacity)
        else:
            utilization = MAX_UTILIZATION if asked > capacity else asked * MAX_UTILIZATION // capacity
            score = broken_linear(strategy.shape, utilization)
            if score <= 0:
                continue  # kube's RequestedToCapacityRatio leaves out resources that score 0
        total += score * resource.weight
        weights += resource.weight
    if weights == 0:
        return 0
    # Go's math.Round: halves away from zero (the scores are never negative)
    return math.floor(total / weights + 0.5) if ratio else total // weights


def balanced_score(pod: Amounts, allocatable: Amounts, requested: Amounts) -> int:
    """NodeResourcesBalancedAllocation's score of the node (0..100); `pod` is its request as it is."""
    fractions: list[float] = []
    for resource in BALANCED_RESOURCES:
        capacity, asked = allocatable_and_requested(resource, pod, allocatable, requested, requested)
        if capacity == 0:
            continue
        fractions.append(min(asked / capacity, 1.0))
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def best_effort(pod: Amounts) -> bool:
    """BalancedAllocation skips a pod that asks for none of its resources (kube issue 129138)."""
    return not any(pod.get(resource, 0) for resource in BALANCED_RESOURCES)
