"""MetaXLink zones: which exclusive cards a multi-card request takes, and how a node scores it.

A MetaX card carries a ``link_zone``: cards of one zone (> 0) talk over
MetaXLink, a zone <= 0 (or none) means the card has no MetaXLink peer.
HAMi's rules (pkg/device/metax/sdevice.go, score.go):

- a pair of cards in the same zone scores 10, every other pair 0; a set
  scores the sum over its pairs;
- an exclusive request (vcore 100) with more candidates than cards needed
  takes the smallest zone that alone holds enough cards, else fills zones
  smallest first, else adds cards without a zone;
- node score = 10 x score(allocated) - loss, where
  loss = score(idle before) - score(allocated) - score(idle after)
  (the same-zone pairs the allocation cuts between itself and the rest).

``hami_exclusive_choice`` reproduces the choice; ``best_exclusive_choice``
is the default mode's exact optimum (highest internal score, then the
smallest loss), which HAMi's zone filling can miss.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from schemas.topology import Device

ZONE_PAIR_SCORE = 10  # HAMi's DirectLinkScore


def zone_of(device: Device) -> int | None:
    """The card's MetaXLink zone, or None when it has none (HAMi: linkZone <= 0)."""
    if device.link_zone is None or device.link_zone <= 0:
        return None
    return device.link_zone


def _zone_sizes(devices: Iterable[Device]) -> dict[int, int]:
    sizes: dict[int, int] = {}
    for device in devices:
        zone = zone_of(device)
        if zone is not None:
            sizes[zone] = sizes.get(zone, 0) + 1
    return sizes


def _pairs(k: int) -> int:
    return k * (k - 1) // 2


def zone_set_score(devices: Iterable[Device]) -> int:
    """10 per pair of cards sharing a zone (each card counted once, by index)."""
    unique = {device.index: device for device in devices}.values()
    return ZONE_PAIR_SCORE * sum(_pairs(k) for k in _zone_sizes(unique).values())


class ZoneScore(msgspec.Struct, frozen=True, kw_only=True):
    """The parts of HAMi's topology-aware node score for one allocation."""

    allocated: int  # score of the cards given to the pod
    idle_before: int  # score of the node's idle cards before the allocation
    idle_after: int  # score of the idle cards left behind

    @property
    def loss(self) -> int:
        return self.idle_before - self.allocated - self.idle_after

    @property
    def node_score(self) -> int:
        return 10 * self.allocated - self.loss


def zone_node_score(chosen: Sequence[Device], idle: Sequence[Device]) -> ZoneScore:
    """Score an allocation against the node's idle cards (chosen cards are idle too)."""
    chosen_indices = {device.index for device in chosen}
    idle_all = {device.index: device for device in idle}
    for device in chosen:
        idle_all.setdefault(device.index, device)
    rest = [device for index, device in idle_all.items() if index not in chosen_indices]
    return ZoneScore(
        allocated=zone_set_score(chosen),
        idle_before=zone_set_score(idle_all.values()),
        idle_after=zone_set_score(rest),
    )


def hami_exclusive_choice(candidates: Sequence[Device], count: int) -> tuple[Device, ...]:
    """HAMi's prioritizeExclusiveDevices, with its random tie made deterministic.

    ``candidates`` is in HAMi's candidate order (the order its Fit walked
    them); inside a zone and among zone-less cards that order is kept. HAMi
    groups zones through a Go map and sorts them with an unstable sort, so
    zones of equal size come out in no fixed order; here the lower zone
    number goes first.
    """
    if len(candidates) <= count:
        return tuple(candidates)
    zones: dict[int, list[Device]] = {}
    zoneless: list[Device] = []
    for device in candidates:
        zone = zone_of(device)
        if zone is None:
            zoneless.append(device)
        else:
            zones.setdefault(zone, []).append(device)
    ordered = sorted(zones.items(), key=lambda item: (len(item[1]), item[0]))
    for _zone, members in ordered:
        if len(members) >= count:
            return tuple(members[:count])
    picked: list[Device] = []
    for _zone, members in ordered:
        for device in members:
            picked.append(device)
            if len(picked) == count:
                return tuple(picked)
    for device in zoneless:
        picked.append(device)
        if len(picked) == count:
            return tuple(picked)
    return tuple(candidates[:count])  # unreachable: len(candidates) > count


class _Plan(msgspec.Struct, frozen=True):
    """How many cards to take from each zone (in zone order) and from the zone-less pool."""

    internal: int  # pairs inside the allocation
    cut: int  # pairs cut between the allocation and the idle cards left in its zones
    zone_takes: tuple[int, ...]
    zoneless_take: int


def best_exclusive_choice(candidates: Sequence[Device], count: int, idle: Sequence[Device]) -> tuple[Device, ...]:
    """The default mode's exact optimum over zones.

    Maximise the allocation's internal score; among equal ones minimise the
    loss (same-zone pairs cut between the allocation and the idle cards
    left behind, which is what protects the next multi-card job); then
    prefer taking fewer zones, smaller zones, lower zone numbers, zone-less
    cards last, and lower card indices. Exact: a small dynamic programme
    over zones, never an enumeration of card sets.
    """
    if count <= 0:
        return ()
    if len(candidates) < count:
        raise ValueError(f"{count} cards requested, {len(candidates)} candidates")
    idle_sizes = _zone_sizes({d.index: d for d in [*idle, *candidates]}.values())
    zones: dict[int, list[Device]] = {}
    zoneless: list[Device] = []
    for device in sorted(candidates, key=lambda d: d.index):
        zone = zone_of(device)
        if zone is None:
            zoneless.append(device)
        else:
            zones.setdefault(zone, []).append(device)
    # Smaller zones first, so that on a full tie the plan touching small zones wins.
    zone_order = sorted(zones, key=lambda z: (idle_sizes[z], z))

    # best[taken] = best plan over the zones seen so far taking `taken` cards from them.
    best: dict[int, _Plan] = {0: _Plan(0, 0, (), 0)}
    for zone in zone_order:
        available = len(zones[zone])
        idle_in_zone = idle_sizes[zone]
        nxt: dict[int, _Plan] = {}
        for taken, plan in best.items():
            for k in range(min(available, count - taken) + 1):
                candidate = _Plan(
                    plan.internal + _pairs(k),
                    plan.cut + k * (idle_in_zone - k),
                    (*plan.zone_takes, k),
                    0,
                )
                total = taken + k
                current = nxt.get(total)
                if current is None or _better(candidate, current):
                    nxt[total] = candidate
        best = nxt
    finals: list[_Plan] = []
    for taken, plan in best.items():
        rest = count - taken
        if 0 <= rest <= len(zoneless):
            finals.append(_Plan(plan.internal, plan.cut, plan.zone_takes, rest))
    chosen = finals[0]
    for plan in finals[1:]:
        if _better(plan, chosen):
            chosen = plan
    picked: list[Device] = []
    for zone, take in zip(zone_order, chosen.zone_takes, strict=True):
        picked.extend(zones[zone][:take])
    picked.extend(zoneless[: chosen.zoneless_take])
    return tuple(sorted(picked, key=lambda d: d.index))


def _plan_key(plan: _Plan) -> tuple[int, int, int, int, tuple[int, ...]]:
    zones_touched = sum(1 for k in plan.zone_takes if k > 0)
    # Reversed takes: a plan that leaves the later (larger) zones untouched sorts first.
    return (-plan.internal, plan.cut, plan.zoneless_take, zones_touched, tuple(-k for k in plan.zone_takes))


def _better(a: _Plan, b: _Plan) -> bool:
    return _plan_key(a) < _plan_key(b)
