"""docs/topics.md states each topic's retention and cleanup as schemas/topics.py's settings table does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from schemas import topics

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "topics.md").read_text()


def documented_retention() -> dict[str, str]:
    """The first table's `retention` column, by topic name."""
    rows: dict[str, str] = {}
    for line in DOC.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and re.fullmatch(r"`[^`]+`", cells[0]):
            rows.setdefault(cells[0].strip("`"), cells[3])
    return rows


def said(settings: topics.TopicSettings) -> str:
    if settings.retention_ms is None:
        return "compacted"
    days = settings.retention_ms / topics.DAY_MS
    return f"{days:g} day" + ("s" if days != 1 else "")


@pytest.mark.parametrize("topic", topics.ALL, ids=lambda t: t.name)
def test_the_doc_gives_each_topic_the_retention_and_cleanup_it_is_created_with(topic: topics.Topic) -> None:
    settings = topic.settings()
    assert settings.cleanup_policy == ("compact" if topic.compacted else "delete")
    assert documented_retention()[topic.name].startswith(said(settings))


def test_the_doc_gives_the_dead_letter_topics_their_retention() -> None:
    (dlq,) = {said(t.dlq_settings()) for t in topics.ALL}
    assert documented_retention()["<topic>.dlq"] == dlq


def test_the_settings_table_in_the_doc_has_the_numbers_of_the_code() -> None:
    by_time, dlq = topics.PLACEMENTS.settings(), topics.PLACEMENTS.dlq_settings()
    compacted = topics.TOPOLOGY_NODES.settings()
    row = next(line for line in DOC.splitlines() if line.startswith("| `retention.ms`"))
    assert f"{by_time.retention_ms} " in row and f"{dlq.retention_ms} " in row
    row = next(line for line in DOC.splitlines() if line.startswith("| `delete.retention.ms`"))
    assert compacted.configs()["delete.retention.ms"] in row
    row = next(line for line in DOC.splitlines() if line.startswith("| partitions"))
    assert row.split("|")[2:5] == [f" {compacted.partitions} ", f" {by_time.partitions} ", f" {dlq.partitions} "]
