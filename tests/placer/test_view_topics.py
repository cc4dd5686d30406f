"""The placer view's table of topics: what each followed topic's event and tombstone do."""

from __future__ import annotations

from schemas import topics
from schemas.events import PendingPodEvent
from services.placer.service import FOLLOWED_TOPICS
from services.placer.view import NO_CHANGE, VIEW_TOPICS, ClusterView

# Followed for the decider's sake: a gang's placement changes no holding (its members' placements do).
NOT_VIEW_STATE = {topics.GANG_PLACEMENTS}


def test_every_followed_topic_but_gang_placements_has_one_row() -> None:
    rows = [row.topic for row in VIEW_TOPICS]
    assert len(rows) == len(set(rows))
    assert set(rows) == set(FOLLOWED_TOPICS) - NOT_VIEW_STATE


def test_every_compacted_row_undoes_its_tombstone() -> None:
    """A compacted topic's tombstone removes its key; a by-time topic has none."""
    for row in VIEW_TOPICS:
        assert (row.tombstone is not None) == row.topic.compacted, row.topic.name


def test_an_event_or_tombstone_of_no_row_changes_nothing() -> None:
    view = ClusterView()
    pending = PendingPodEvent(uid="u", namespace="ns", name="p", resource_version="1", requests={})
    assert view.apply(pending) is NO_CHANGE
    assert view.apply_tombstone(topics.PODS_PENDING.name, "u") is NO_CHANGE
    assert view.apply_tombstone("no.such.topic", "u") is NO_CHANGE
    assert view.sizes()["pods_known"] == 0
