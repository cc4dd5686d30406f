"""A shape group's bound: the least victim cost any node of the group can have (search.py's walk).

The victims on a node free what the preemptor lacks there: each resource the node rules count
(`need`: the request less what is free) and, for whole devices, the devices. Every such set is
made of lower-priority pods, so for the cheapest set S (pickOneNodeForPreemption's order: highest
victim priority, then the sum, then the count):

    top     S's highest priority is at least t, the least priority p such that the pods of priority
            at most p (the *pool* of p: a suffix of the pods, most important first) free enough
    count   S holds at least k pods, the fewest of t's pool whose requests reach each need (S lies in
            t's pool when its top is t; were its top higher, S is worse than the bound anyway)
    sum     at least t plus the k - 1 lowest priorities of the pool
    start   at most the latest start of a pod of priority t on any node of the group

The pods' requests and devices are non-negative, so what a suffix frees shrinks as it starts later:
t is found by bisection on the suffix sums, k on the pool's requests sorted largest first; the sums
and sorted pools are kept per group (`GroupBound`). Most groups are never bounded: `Walk` visits
them by a floor that holds for every preemptor asking as many whole devices, worked out for every
count once per cluster state (`BoundTable`), and bounds a group only when its floor could still
come first. The walk is kept per preemptor (search.py).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections.abc import Iterator, Sequence

from engine.decide.preempt.shapes import BoundGroup

PRIORITY_OFFSET = 2**31  # upstream adds MaxInt32 + 1 so that negative priorities sum as they should
Bound = tuple[float, ...]
NO_VICTIM_NEEDED: Bound = (-math.inf,)


class Need:
    """What the preemptor lacks, as the bound reads it: each resource's request and the whole devices."""

    def __init__(self, priority: int, lacking: dict[str, int], devices: int, wants_devices: bool) -> None:
        self.priority = priority
        self.lacking = lacking  # resource -> milli-units asked (the node rules' requests)
        self.devices = devices  # whole devices asked (0: none, or not whole devices)
        # set score and broken score are unknown before a node is tried: a device pod's bound leaves them open
        self.tail: Bound = (-math.inf, -math.inf) if wants_devices else (-0.0, 0.0)


def _suffix_sums(values: Sequence[int]) -> list[int]:
    """sums[j]: what the pods from position j on free (non-increasing in j; sums[len] is 0)."""
    sums = list(itertools.accumulate(reversed(values), initial=0))
    sums.reverse()
    return sums


class GroupBound:
    """One group's bound inputs, read off its first shape once: suffix sums, runs of one priority."""

    def __init__(self, group: BoundGroup) -> None:
        shape = group.first
        self.group = group
        self.priorities = shape.priorities  # most important first: never increasing
        self._negated = [-p for p in self.priorities]  # increasing: for bisection
        self.count = len(self.priorities)
        self.free = shape.free
        self.devices_free = shape.devices_free
        self._requests = shape.requests
        # per resource (and "" for whole devices) as the bound first reads it: each pod's amount, and the
        # suffix sums negated (increasing, for bisection)
        self._values: dict[str, list[int]] = {"": list(shape.devices_held)}
        self._negated_sums: dict[str, list[int]] = {}
        self._priority_sums = _suffix_sums(self.priorities)
        self._run_start = [self._negated.index(-p) for p in self.priorities]  # the first pod of its priority
        self._pools: dict[tuple[str, int], list[int]] = {}  # (resource, pool start): the pool's amounts' running sums
        self._device_floors: list[Bound] | None = None  # device_floor's answers, by devices lacking - 1

    def device_floor(self, devices: int) -> Bound | None:
        """The bound, its first five parts, were `devices` whole devices all the node lacked (any priority);
        None: its pods hold too few."""
        floors = self._device_floors
        if floors is None:  # `bound` with whole devices alone lacking, every count at once
            negated = self._sums("")
            floors = []
            for amount in range(1, -negated[0] + 1):
                start = self._run_start[bisect.bisect_right(negated, -amount) - 1]
                top = self.priorities[start]
                fewest = self._fewest("", start, amount)
                lowest = top + self._priority_sums[self.count - fewest + 1]
                latest = self.group.latest.get(top, math.inf)
                floors.append((0.0, float(top), float(lowest + fewest * PRIORITY_OFFSET), float(fewest), -latest))
            self._device_floors = floors
        return floors[devices - 1] if devices <= len(floors) else None

    def _sums(self, resource: str) -> list[int]:
        found = self._negated_sums.get(resource)
        if found is None:
            values = self._values.get(resource)
            if values is None:
                values = self._values[resource] = [r.get(resource, 0) for r in self._requests]
            found = self._negated_sums[resource] = [-s for s in _suffix_sums(values)]
        return found

    def _needs(self, need: Need) -> list[tuple[str, int]]:
        """Each (resource, amount) the node lacks (a resource it does not report bounds nothing)."""
        out: list[tuple[str, int]] = []
        if self.free is not None:
            for resource, want in need.lacking.items():
                if resource in self.free and want - self.free[resource] > 0:
                    out.append((resource, want - self.free[resource]))
        if need.devices - self.devices_free > 0:
            out.append(("", need.devices - self.devices_free))
        return out

    def _fewest(self, resource: str, start: int, amount: int) -> int:
        """The fewest pods of the pool from `start` whose amounts of `resource` reach `amount` (they do)."""
        sums = self._pools.get((resource, start))
        if sums is None:
            ordered = sorted(self._values[resource][start:], reverse=True)
            sums = self._pools[(resource, start)] = list(itertools.accumulate(ordered))
        return bisect.bisect_left(sums, amount) + 1

    def bound(self, need: Need) -> Bound | None:
        """The bound (module docstring); None: no node of the group can be a candidate."""
        cut = bisect.bisect_left(self._negated, -need.priority + 1)  # the first pod of lower priority
        if cut == self.count:
            return None
        needs = self._needs(need)
        if not needs:
            return NO_VICTIM_NEEDED
        last = self.count - 1  # the latest position from which the pods free every need
        for resource, amount in needs:
            negated = self._sums(resource)
            if -negated[cut] < amount:
                return None
            last = min(last, bisect.bisect_right(negated, -amount) - 1)
        start = self._run_start[last]
        top = self.priorities[start]
        fewest = max(self._fewest(resource, start, amount) for resource, amount in needs)
        lowest = top + self._priority_sums[self.count - fewest + 1]  # the top and the k - 1 lowest
        latest = self.group.latest.get(top, math.inf)
        return (0.0, float(top), float(lowest + fewest * PRIORITY_OFFSET), float(fewest), -latest, *need.tail)


class Walk:
    """The groups in bound order, worked out only as far as they are read (and kept for the next read).

    Each group also has a *floor*, a bound for every preemptor asking as many whole devices (any
    preemptor, when it asks none): its bound when the devices were all it lacked, else the top at least
    its lowest priority, one victim of that priority, its latest start. Walking the groups by floor,
    a group's own bound is worked out only once the floor reaches the least bound found and not yet
    given out: a preemption that stops early bounds the few groups whose floor is below its best
    candidate's order. Groups that lack nothing (their bound is below every floor) are found first.
    """

    def __init__(self, table: BoundTable, need: Need) -> None:
        self._table = table
        self._need = need
        self._given: list[Step] = []
        self._floors = table.floors(need.devices)
        self._next_floor = 0  # the next group by floor not yet bounded
        self._found: list[tuple[Bound, str, int]] = [(b, table.first[i], i) for b, i in table.lacking_nothing(need)]
        heapq.heapify(self._found)

    def __iter__(self) -> Iterator[Step]:
        at = 0
        while True:
            if at == len(self._given) and not self._give_next():
                return
            yield self._given[at]
            at += 1

    def _give_next(self) -> bool:
        table, found, floors, tail = self._table, self._found, self._floors, self._need.tail
        while self._next_floor < len(floors):
            floor, first, i = floors[self._next_floor]
            if found and found[0][:2] < ((*floor, *tail), first):
                break
            self._next_floor += 1
            bound = table.bound_of(i).bound(self._need)
            if bound is not None and bound != NO_VICTIM_NEEDED:  # those were found first
                heapq.heappush(found, (bound, first, i))
        if not found:
            return False
        bound, first, i = heapq.heappop(found)
        self._given.append((bound, first, table.groups[i]))
        return True


Step = tuple[Bound, str, BoundGroup]  # (a group's bound, its first node, the group)


class BoundTable:
    """Every group of shapes with its floor (`Walk`), and the groups by what they have free."""

    def __init__(self, groups: Sequence[BoundGroup]) -> None:
        self.groups = groups
        self.first = [g.first.members[0] for g in groups]
        self._floors: dict[int, list[tuple[Bound, str, int]]] = {}  # per whole devices asked: (floor, first, group)
        self._most_devices = max((g.first.devices_total for g in groups), default=0)
        self._bounds: dict[int, GroupBound] = {}
        # per resource, (free amount, group) ascending, and the groups that do not report it; the same for devices
        self._free: dict[str, list[tuple[int, int]]] = {}
        self._unreported: dict[str, set[int]] = {}
        reported = {r for g in groups if g.first.free is not None for r in g.first.free}
        for resource in reported:
            free = [
                (g.first.free[resource], i) for i, g in enumerate(groups) if g.first.free and resource in g.first.free
            ]
            self._free[resource] = sorted(free)
            self._unreported[resource] = set(range(len(groups))) - {i for _, i in free}
        self._devices_free = sorted((g.first.devices_free, i) for i, g in enumerate(groups))

    def bound_of(self, i: int) -> GroupBound:
        found = self._bounds.get(i)
        if found is None:
            found = self._bounds[i] = GroupBound(self.groups[i])
        return found

    def floors(self, devices: int) -> list[tuple[Bound, str, int]]:
        """The groups by floor (`Walk`) for a preemptor asking `devices` whole devices; a group whose pods hold
        too few devices is left out (no node of it can be a candidate). The first preemptor asking devices
        works them out for every count a node has, kept while the nodes and pods stay the same."""
        if devices > self._most_devices:
            return []  # no node has as many: every group is left out
        found = self._floors.get(devices)
        if found is None and devices > 0:
            for count in range(1, self._most_devices + 1):
                self._floors[count] = self._floors_for(count)
            found = self._floors[devices]
        elif found is None:
            found = self._floors[devices] = self._floors_for(0)
        return found

    def _floors_for(self, devices: int) -> list[tuple[Bound, str, int]]:
        found: list[tuple[Bound, str, int]] = []
        for i, group in enumerate(self.groups):
            lacking = devices - group.first.devices_free
            floor = self.bound_of(i).device_floor(lacking) if lacking > 0 else NO_VICTIM_NEEDED
            if floor == NO_VICTIM_NEEDED:
                lowest = group.first.priorities[-1]  # a shape runs at least one pod
                floor = (0.0, float(lowest), float(lowest + PRIORITY_OFFSET), 1.0, -group.latest.get(lowest, math.inf))
            if floor is not None:
                found.append((floor, self.first[i], i))
        found.sort()
        return found

    def lacking_nothing(self, need: Need) -> list[tuple[Bound, int]]:
        """The groups where nothing the bound reads is lacking, with lower-priority pods (`GroupBound._needs`)."""
        sets: list[set[int]] = []
        if need.devices > 0:
            sets.append(
                {i for _, i in self._devices_free[bisect.bisect_left(self._devices_free, (need.devices, -1)) :]}
            )
        for resource, want in need.lacking.items():
            free = self._free.get(resource)
            if free is not None:
                enough = {i for _, i in free[bisect.bisect_left(free, (want, -1)) :]}
                sets.append(enough | self._unreported[resource])
        sets.sort(key=len)
        chosen = set(range(len(self.groups))) if not sets else sets[0].intersection(*sets[1:])
        return [(NO_VICTIM_NEEDED, i) for i in sorted(chosen) if self.bound_of(i).bound(need) == NO_VICTIM_NEEDED]
