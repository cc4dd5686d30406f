"""The structured-parameters allocator: devices for a pod's ResourceClaims on one node; pure.

As k8s.io/dynamic-resource-allocation's structured allocator: claims one after the other, each
request's devices one after the other, every candidate tried in pool and slice order, backtracking
across requests, subrequests and claims; `firstAvailable` takes its first subrequest that leads to a
solution. One request's devices are tried as sets, which finds upstream's first solution without
every ordering; the search is bounded by `max_steps` (AllocationError). With `score`, it goes on to
`max_solutions` and keeps the best-scored one (topology leads). docs/engine.md, "DRA", says the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from fractions import Fraction

import msgspec

from engine.node.dra.capacity import Amounts, ShareLedger, share_id
from engine.node.dra.cel_programs import CelPrograms, SelectorError, shown
from engine.node.dra.constraints import AttributeValues, Constraint, taint_prevents
from engine.node.dra.counters import CounterLedger
from engine.node.dra.model import AllocationResult, DeviceClass, DeviceId, NodeView, ResourceClaim, ResourceSlice
from engine.node.dra.pools import gather_pools, node_matches
from engine.node.dra.requests import (
    ALLOCATION_RESULTS_MAX_SIZE,
    AllocationError,
    Candidate,
    Features,
    RequestData,
    TooManyResults,
    check_all_pools,
    claim_text,
    request_entries,
)
from engine.node.dra.result import Chosen, allocation_result

MAX_STEPS, MAX_SOLUTIONS = 20_000, 64  # about a second of search at worst (90 devices); solutions scored


class AllocationInput(msgspec.Struct, frozen=True, kw_only=True):
    """What the allocator reads of the cluster."""

    slices: tuple[ResourceSlice, ...]
    classes: Mapping[str, DeviceClass]
    allocated: Set[DeviceId] = frozenset()  # devices that allocated claims hold (adminAccess ones excluded)
    # what the allocations of shared devices (allowMultipleAllocations) consume, by device and capacity
    consumed: Mapping[DeviceId, Mapping[str, Fraction]] = {}
    features: Features = Features()


def allocate(
    node: NodeView,
    claims: Sequence[ResourceClaim],
    given: AllocationInput,
    programs: CelPrograms,
    *,
    score: Callable[[list[DeviceId]], float] | None = None,
    max_steps: int = MAX_STEPS,
    max_solutions: int = MAX_SOLUTIONS,
) -> tuple[AllocationResult, ...] | None:
    """One AllocationResult per claim, in order; None when the claims cannot be allocated on the node.

    Raises AllocationError when allocation cannot proceed (a missing class, a broken selector, ...)."""
    search = _Search(node, claims, given, programs, score, max_steps, max_solutions)
    return search.run()


class _Search:
    def __init__(
        self,
        node: NodeView,
        claims: Sequence[ResourceClaim],
        given: AllocationInput,
        programs: CelPrograms,
        score: Callable[[list[DeviceId]], float] | None,
        max_steps: int,
        max_solutions: int,
    ) -> None:
        self.node, self.claims, self.given, self.programs = node, list(claims), given, programs
        self.score, self.max_steps, self.max_solutions = score, max_steps, max_solutions
        self.pools = gather_pools(given.slices, node)
        self.entries: dict[tuple[int, int], list[RequestData]] = {}
        self.constraints: list[list[Constraint]] = []
        self.results: list[list[Chosen]] = [[] for _ in self.claims]
        self.selected: dict[tuple[int, int], int] = {}
        self.allocating: dict[DeviceId, set[int]] = {}
        self.counters = CounterLedger(given.allocated)
        self.matches: dict[tuple[DeviceId, int, int, int], bool] = {}
        self.position: dict[DeviceId, int] = {}  # a candidate's place in the search order
        self.open: dict[tuple[int, int, int], list[tuple[int, Candidate, bool]]] = {}
        self.attributes: dict[tuple[int, str], AttributeValues | None] = {}  # (position, attribute) -> value
        self.shares = ShareLedger(given.consumed)  # what shared devices' allocations consume
        self.steps = 0
        self.best: tuple[float, list[list[Chosen]], dict[tuple[int, int], int]] | None = None
        self.found = 0

    # --- setup -------------------------------------------------------------------------
    def _prepare(self) -> None:
        for c, claim in enumerate(self.claims):
            self.entries.update(request_entries(c, claim, self.given.classes, self.given.features))
            least = 0
            for r in range(len(claim.spec.devices.requests)):
                for data in self.entries[(c, r)]:
                    if data.mode == "All":
                        self._all_devices(data, claim)
                least += min(d.num_devices for d in self.entries[(c, r)])
            if least > ALLOCATION_RESULTS_MAX_SIZE:
                raise AllocationError(
                    f"claim {claim_text(claim)}: number of requested devices {least} exceeds the claim limit"
                    f" of {ALLOCATION_RESULTS_MAX_SIZE}"
                )
            constraints = []
            for i, spec in enumerate(claim.spec.devices.constraints):
                if spec.match_attribute is None and spec.distinct_attribute is None:
                    raise AllocationError(
                        f"claim {claim_text(claim)}, constraint #{i}: empty constraint (unsupported constraint type?)"
                    )
                constraints.append(Constraint(spec, self.given.features.DRAListTypeAttributes))
            self.constraints.append(constraints)

    def _all_devices(self, data: RequestData, claim: ResourceClaim) -> None:
        check_all_pools(data, claim, self.pools)
        data.all_devices = [c for c in self._candidates() if self._selectable(data, c)]
        data.num_devices = len(data.all_devices)

    def _candidates(self) -> list[Candidate]:
        return [
            Candidate(driver=pool.driver, pool=pool, slice=s, device=d)
            for pool in self.pools
            for s in pool.slices
            for d in s.spec.devices
        ]

    def run(self) -> tuple[AllocationResult, ...] | None:
        self._prepare()
        self.candidates = [c for c in self._candidates() if not c.pool.incomplete and not c.pool.invalid]
        self.position = {c.id: i for i, c in enumerate(self.candidates)}
        done = self._one(0, 0, 0, 0, sub_fixed=False)
        if not done and self.best is None:
            if any(p.invalid for p in self.pools):
                raise AllocationError("invalid resource pools were encountered")
            return None
        if self.best is not None:
            _, self.results, self.selected = self.best
        bound_node = self.node.name if self.given.features.DRADeviceBindingConditions else None
        return tuple(
            allocation_result(claim, c, self.results[c], self.entries, self.selected, bound_node)
            for c, claim in enumerate(self.claims)
        )

    # --- selection ---------------------------------------------------------------------
    def _selectable(self, data: RequestData, candidate: Candidate) -> bool:
        key = (candidate.id, data.claim_index, data.request_index, data.sub_index)
        found = self.matches.get(key)
        if found is None:
            found = self._selectors_match(data, candidate, from_class=True) and self._selectors_match(
                data, candidate, from_class=False
            )
            if found and candidate.slice.spec.per_device_node_selection:
                d = candidate.device
                found = node_matches(self.node, d.node_name, d.all_nodes, d.node_selector)
            self.matches[key] = found
        return found

    def _selectors_match(self, data: RequestData, candidate: Candidate, *, from_class: bool) -> bool:
        selectors = data.device_class.spec.selectors if from_class else data.selectors
        claim = claim_text(self.claims[data.claim_index])
        whose = f"class {data.device_class.metadata.name}" if from_class else f"claim {claim}"
        lists = self.given.features.DRAListTypeAttributes
        for i, selector in enumerate(selectors):
            assert selector.cel is not None  # checked when the requests were read
            expression = selector.cel.expression
            try:
                if not self.programs.selects(expression, candidate.driver, candidate.device, lists):
                    return False
            except SelectorError as exc:
                device = "/".join(candidate.id)
                raise AllocationError(f"{whose}: selector #{i} {shown(expression)} on device {device}: {exc}") from None
        return True

    def _shared(self, candidate: Candidate) -> bool:
        return bool(candidate.device.allow_multiple_allocations) and self.given.features.DRAConsumableCapacity

    def _in_use(self, data: RequestData, candidate: Candidate) -> bool:
        device = candidate.id
        if data.admin_access:
            return data.claim_index in self.allocating.get(device, ())
        if self._shared(candidate):  # shared while its capacity lasts; an exclusive allocation takes it
            return device in self.given.allocated
        return device in self.given.allocated or bool(self.allocating.get(device))

    # --- the search --------------------------------------------------------------------
    def _step(self) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            raise AllocationError(
                f"allocation search aborted after {self.max_steps} steps without a solution"
                f" ({len(self.claims)} claim(s), {len(self.candidates)} device(s) on node {self.node.name})"
            )

    def _one(self, c: int, r: int, s: int, d: int, *, sub_fixed: bool) -> bool:
        if self.best is not None and self.steps >= self.max_steps:
            return True  # out of steps with a solution in hand: keep the best so far
        self._step()
        if c >= len(self.claims):
            return self._solution()
        if r >= len(self.claims[c].spec.devices.requests):
            try:
                return self._one(c + 1, 0, 0, 0, sub_fixed=False)
            except TooManyResults:
                return False  # another path through earlier claims may need fewer devices
        entries = self.entries[(c, r)]
        if not sub_fixed and entries[0].sub_request:
            return self._first_available(c, r, entries)
        data = entries[s]
        if data.mode == "All" and not data.all_devices:
            return False  # All needs at least one device
        if d >= data.num_devices:
            return self._one(c, r + 1, 0, 0, sub_fixed=False)
        if len(self.results[c]) + data.num_devices - d > ALLOCATION_RESULTS_MAX_SIZE:
            raise TooManyResults()
        if data.all_devices is not None:
            return self._all_next(data, d, sub_fixed)
        fitting = self._fitting(data, self._first(c, d))
        if not self._enough(data, fitting, data.num_devices - d):
            return False
        for candidate in fitting:
            if not self._selectable(data, candidate) or not self._take(data, candidate, must=False):
                continue
            try:
                done = self._one(c, r, s, d + 1, sub_fixed=sub_fixed)
            except TooManyResults:
                self._give_back(data, candidate)
                raise
            if done:
                return True
            self._give_back(data, candidate)
        return False

    def _fitting(self, data: RequestData, start: int) -> list[Candidate]:
        """The candidates from `start` on that the request may take now, but for counters.

        A candidate whose selector errs stays in: the error is raised when the search
        reaches it, as upstream raises it."""
        constraints = [k for k in self.constraints[data.claim_index] if k.applies(data.request, data.sub_request)]
        out = []
        for position, candidate, errs in self._open(data):
            if position < start or self._taken_now(data, candidate):
                continue
            if errs or all(k.admits_value(self._attribute(position, candidate, k)) for k in constraints):
                out.append(candidate)
        return out

    def _open(self, data: RequestData) -> list[tuple[int, Candidate, bool]]:
        """The candidates the request could ever take in this search (selected, not held by other
        claims), with whether the selector errs on it; computed once per request."""
        key = (data.claim_index, data.request_index, data.sub_index)
        found = self.open.get(key)
        if found is None:
            found = []
            for position, candidate in enumerate(self.candidates):
                if not data.admin_access and candidate.id in self.given.allocated:
                    continue  # held by another claim (a shared device: wholly, by a claim without a share)
                try:
                    if self._selectable(data, candidate):
                        found.append((position, candidate, False))
                except AllocationError:
                    found.append((position, candidate, True))
            self.open[key] = found
        return found

    def _taken_now(self, data: RequestData, candidate: Candidate) -> bool:
        """In use by this search's own choices (what other claims hold is out of `_open` already)."""
        if data.admin_access:
            return data.claim_index in self.allocating.get(candidate.id, ())
        return not self._shared(candidate) and bool(self.allocating.get(candidate.id))

    def _attribute(self, position: int, candidate: Candidate, constraint: Constraint) -> AttributeValues | None:
        key = (position, constraint.attribute)
        if key not in self.attributes:
            self.attributes[key] = constraint.value_of(candidate.device, candidate.driver)
        return self.attributes[key]

    def _enough(self, data: RequestData, fitting: list[Candidate], needed: int) -> bool:
        """Whether the candidates left can still give `needed` devices: fewer, or fewer distinct values
        of a distinctAttribute than needed, and no choice among them can succeed (pruned)."""
        if len(fitting) < needed:
            return False
        for constraint in self.constraints[data.claim_index]:
            if constraint.distinct and constraint.applies(data.request, data.sub_request):
                values = {constraint.value_of(f.device, f.driver) for f in fitting}
                if len(values) < needed:
                    return False
        return True

    def _first(self, c: int, d: int) -> int:
        """Where the candidates for a request's next device start: after its previous device.

        The devices of one request are interchangeable to every constraint and counter, so
        upstream's first solution lists them in candidate order; trying only later candidates
        finds the same solution without walking every ordering of the same devices."""
        if d == 0:
            return 0
        return self.position[self.results[c][-1].candidate.id] + 1

    def _first_available(self, c: int, r: int, entries: list[RequestData]) -> bool:
        all_too_many = True
        for s in range(len(entries)):
            self.selected[(c, r)] = s  # the path's choice, read when a solution is kept
            try:
                done = self._one(c, r, s, 0, sub_fixed=True)
            except TooManyResults:
                continue
            all_too_many = False
            if done:
                return True
        if all_too_many:
            raise TooManyResults()
        return False

    def _all_next(self, data: RequestData, d: int, sub_fixed: bool) -> bool:
        assert data.all_devices is not None
        candidate = data.all_devices[d]
        if self._in_use(data, candidate) or not self._take(data, candidate, must=True):
            return False  # every device is needed: no other order can help
        done = False
        try:
            done = self._one(data.claim_index, data.request_index, data.sub_index, d + 1, sub_fixed=sub_fixed)
        finally:
            if not done:
                self._give_back(data, candidate)
        return done

    def _take(self, data: RequestData, candidate: Candidate, *, must: bool) -> bool:
        device = candidate.device
        if device.consumes_counters and (
            not self.given.features.DRAPartitionableDevices or not self.counters.take(candidate.pool, device)
        ):
            return False
        if self.given.features.DRADeviceTaints and taint_prevents(device, data.tolerations):
            self._counters_back(candidate)
            return False
        consumed = self.shares.check(candidate.id, device, data.capacity, shared=self._shared(candidate))
        if consumed is False:
            self._counters_back(candidate)
            return False
        constraints = self.constraints[data.claim_index]
        for i, constraint in enumerate(constraints):
            if not constraint.add(data.request, data.sub_request, device, candidate.driver):
                if must:
                    claim = claim_text(self.claims[data.claim_index])
                    raise AllocationError(
                        f"claim {claim}, request {data.name}: cannot add device {'/'.join(candidate.id)}"
                        " because a claim constraint would not be satisfied"
                    )
                for earlier in constraints[:i]:
                    earlier.remove(data.request, data.sub_request, device, candidate.driver)
                self._counters_back(candidate)
                return False
        self.allocating.setdefault(candidate.id, set()).add(data.claim_index)
        self.results[data.claim_index].append(self._chosen(data, candidate, consumed or None))
        return True

    def _chosen(self, data: RequestData, candidate: Candidate, consumed: Amounts | bool | None) -> Chosen:
        if not isinstance(consumed, dict):
            return Chosen(data=data, candidate=candidate)
        self.shares.add(candidate.id, consumed)
        claim = self.claims[data.claim_index].metadata
        ordinal = sum(1 for c in self.results[data.claim_index] if c.candidate.id == candidate.id)
        return Chosen(
            data=data,
            candidate=candidate,
            share_id=share_id(claim.uid or claim.name, data.name, candidate.id, ordinal),
            consumed=consumed,
        )

    def _counters_back(self, candidate: Candidate) -> None:
        if candidate.device.consumes_counters:
            self.counters.give_back(candidate.pool, candidate.device)

    def _give_back(self, data: RequestData, candidate: Candidate) -> None:
        for constraint in self.constraints[data.claim_index]:
            constraint.remove(data.request, data.sub_request, candidate.device, candidate.driver)
        self.allocating[candidate.id].discard(data.claim_index)
        self._counters_back(candidate)
        chosen = self.results[data.claim_index].pop()
        if chosen.share_id is not None:
            self.shares.add(candidate.id, chosen.consumed, -1)

    def _solution(self) -> bool:
        if self.score is None:
            return True
        self.found += 1
        devices = [chosen.candidate.id for result in self.results for chosen in result]
        value = self.score(devices)
        if self.best is None or value > self.best[0]:
            self.best = (value, [list(r) for r in self.results], dict(self.selected))
        return self.found >= self.max_solutions
