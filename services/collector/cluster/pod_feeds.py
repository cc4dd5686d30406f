"""Kinds whose objects feed the pending pods rather than a topic of their own: Volcano PodGroups
(the pods' gangs) and ResourceClaims (published when allocated; a claim's arrival brings out again
the pending pods that name it)."""

from __future__ import annotations

from schemas.events import AllocatedClaimEvent
from services.collector.cluster import dra
from services.collector.cluster.objects import PodGroup
from services.collector.cluster.trackers import KeyedTracker, Outcome, PodTracker


class PodGroupsOfPods:
    """PodGroups feed the pods' gangs; a resync of the pods re-publishes the gangs, so `force` is unused."""

    def __init__(self, pods: PodTracker) -> None:
        self._pods = pods

    def relisted(self, objs: list[PodGroup], now: float, *, force: bool = False) -> Outcome:
        return self._pods.podgroups_relisted(objs, now)

    def observe(self, obj: PodGroup, now: float) -> Outcome:
        return self._pods.podgroup_observed(obj, now)

    def gone(self, key: str, now: float) -> Outcome:
        return self._pods.podgroup_gone(key, now)


class ClaimsOfPods:
    """ResourceClaims: the allocated ones go to resources.claims (the rest are gone there), and a
    claim seen for the first time brings the pending pods that name it out again."""

    def __init__(self, claims: KeyedTracker[dra.ResourceClaim, AllocatedClaimEvent], pods: PodTracker) -> None:
        self._claims = claims
        self._pods = pods
        self._seen: dict[str, tuple[str, str]] = {}  # uid -> (namespace, name) of every claim that exists

    def relisted(self, objs: list[dra.ResourceClaim], now: float, *, force: bool = False) -> Outcome:
        outcome = self._claims.relisted([c for c in objs if dra.is_allocated(c)], now, force=force)
        present = {c.metadata.uid for c in objs}
        for uid in [u for u in self._seen if u not in present]:
            del self._seen[uid]
        for claim in objs:
            outcome.extend(self._arrived(claim, now))
        return outcome

    def observe(self, obj: dra.ResourceClaim, now: float) -> Outcome:
        published = (
            self._claims.observe(obj, now) if dra.is_allocated(obj) else self._claims.gone(obj.metadata.uid, now)
        )
        return published.extend(self._arrived(obj, now))

    def gone(self, key: str, now: float) -> Outcome:
        self._seen.pop(key, None)
        return self._claims.gone(key, now)

    def _arrived(self, claim: dra.ResourceClaim, now: float) -> Outcome:
        meta = claim.metadata
        if meta.uid in self._seen:
            return Outcome()
        self._seen[meta.uid] = (meta.namespace, meta.name)
        return self._pods.claim_appeared(meta.namespace, meta.name, now)
