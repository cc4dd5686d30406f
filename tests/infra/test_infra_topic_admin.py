"""Topics durable by default (finding 14): replication, min.insync.replicas, retention and cleanup, checked and fixed.

The embedded broker (Tansu 0.6) creates topics with their configs and answers
DescribeConfigs, but knows neither AlterConfigs nor CreatePartitions: the plan is
tested purely, creation and the check against Tansu, a fix that Tansu cannot make
as a difference left (exit 1), and the fix calls through a recording admin client.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.admin.new_topic import NewTopic
from hypothesis import given
from hypothesis import strategies as st
from infra_helpers import unique_topic

import schemas.topics
from schemas import events
from topoplace.config import ConfigError, Settings, TopicDurability
from topoplace.kafka import admin as topic_admin
from topoplace.kafka.admin import ActualTopic, Difference, WantedTopic, durability_for, ensure_topics, plan_topics

DAY_MS = str(24 * 3_600_000)


def wanted(name: str = "placements", **configs: str) -> WantedTopic:
    base = {"cleanup.policy": "delete", "retention.ms": DAY_MS, "min.insync.replicas": "2"}
    return WantedTopic(name=name, partitions=6, replication_factor=3, configs={**base, **configs})


def actual_of(topic: WantedTopic, **changes: Any) -> ActualTopic:
    fields: dict[str, Any] = {
        "name": topic.name,
        "partitions": topic.partitions,
        "replication_factor": topic.replication_factor,
        "configs": dict(topic.configs),
        "dynamic_configs": dict(topic.configs),
    }
    return ActualTopic(**{**fields, **changes})


# --- durability -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("brokers", "expected"), [(1, (1, 1)), (2, (2, 2)), (3, (3, 2)), (7, (3, 2))])
def test_durability_defaults_to_three_copies_two_in_sync_as_far_as_the_cluster_goes(
    brokers: int, expected: tuple[int, int]
) -> None:
    assert durability_for(TopicDurability(), brokers) == expected


def test_configured_durability_wins_and_one_the_cluster_cannot_hold_names_the_variable() -> None:
    settings = Settings.from_env(
        {"TOPOPLACE_TOPIC_REPLICATION_FACTOR": "5", "TOPOPLACE_TOPIC_MIN_INSYNC_REPLICAS": "3"}
    )
    assert durability_for(settings.topic_durability, 6) == (5, 3)
    with pytest.raises(ConfigError) as caught:
        durability_for(settings.topic_durability, 3)
    assert caught.value.variable == "TOPOPLACE_TOPIC_REPLICATION_FACTOR"
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"TOPOPLACE_TOPIC_REPLICATION_FACTOR": "2", "TOPOPLACE_TOPIC_MIN_INSYNC_REPLICAS": "3"})
    assert caught.value.variable == "TOPOPLACE_TOPIC_MIN_INSYNC_REPLICAS"
    for bad in ("0", "-1", "three"):
        with pytest.raises(ConfigError, match="TOPOPLACE_TOPIC_REPLICATION_FACTOR"):
            Settings.from_env({"TOPOPLACE_TOPIC_REPLICATION_FACTOR": bad})


# --- the plan (pure) ----------------------------------------------------------------------------------


def test_a_missing_topic_is_created_with_every_setting() -> None:
    plan = plan_topics([wanted()], {})
    assert plan.create == [wanted()] and not plan.alter and not plan.grow and not plan.differences


def test_a_config_that_differs_is_altered_keeping_the_topics_other_configs() -> None:
    topic = wanted()
    found = actual_of(
        topic,
        configs={**topic.configs, "retention.ms": "604800000", "min.insync.replicas": "1"},
        dynamic_configs={"retention.ms": "604800000", "segment.bytes": "1048576"},
    )
    plan = plan_topics([topic], {topic.name: found})
    assert plan.alter == {topic.name: {**topic.configs, "segment.bytes": "1048576"}}
    assert sorted(str(d) for d in plan.differences) == [
        "placements: min.insync.replicas is 1, wanted 2",
        "placements: retention.ms is 604800000, wanted 86400000",
    ]
    assert all(d.fixable for d in plan.differences)


def test_partitions_only_grow_and_a_replication_factor_that_differs_is_reported_not_fixed() -> None:
    topic = wanted()
    fewer = plan_topics([topic], {topic.name: actual_of(topic, partitions=2, replication_factor=1)})
    assert fewer.grow == {topic.name: 6}
    assert fewer.differences == [
        Difference(topic=topic.name, setting="partitions", wanted="6", actual="2", fixable=True),
        Difference(topic=topic.name, setting="replication factor", wanted="3", actual="1", fixable=False),
    ]
    more = plan_topics([topic], {topic.name: actual_of(topic, partitions=12)})
    assert not more.grow and not more.differences


def test_a_cleanup_policy_list_is_compared_as_a_set() -> None:
    topic = wanted(**{"cleanup.policy": "compact,delete"})
    found = actual_of(topic, configs={**topic.configs, "cleanup.policy": "[delete, compact]"})
    assert not plan_topics([topic], {topic.name: found}).differences
    found = actual_of(topic, configs={**topic.configs, "cleanup.policy": "compact"})
    assert [d.setting for d in plan_topics([topic], {topic.name: found}).differences] == ["cleanup.policy"]


@given(
    replication_factor=st.integers(1, 5),
    min_insync=st.integers(1, 5),
    with_dlq=st.booleans(),
    unset=st.sampled_from(["cleanup.policy", "retention.ms", "delete.retention.ms", "min.insync.replicas"]),
)
def test_a_topic_as_wanted_needs_nothing_and_a_missing_config_is_set(
    replication_factor: int, min_insync: int, with_dlq: bool, unset: str
) -> None:
    table = schemas.topics.settings_table(schemas.topics.ALL, with_dlq)
    topics = topic_admin.wanted_topics(table, replication_factor, min_insync)
    as_wanted = {t.name: actual_of(t) for t in topics}
    assert plan_topics(topics, as_wanted) == topic_admin.TopicPlan()
    lacking = {name: actual_of(t, configs={k: v for k, v in t.configs.items() if k != unset}) for name, t in
               ((t.name, t) for t in topics)}  # fmt: skip
    plan = plan_topics(topics, lacking)
    assert set(plan.alter) == {t.name for t in topics if unset in t.configs}
    assert all(d.setting == unset and d.actual == "unset" for d in plan.differences)


# --- against the embedded broker -----------------------------------------------------------------------


async def described_configs(bootstrap: str, names: list[str]) -> dict[str, dict[str, str]]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, n) for n in names])
    finally:
        await admin.close()
    return {
        resource[3]: {entry[0]: entry[1] for entry in resource[4]}
        for response in responses
        for resource in response.resources
    }


async def test_topics_are_created_with_their_retention_cleanup_and_durability(kafka_bootstrap: str) -> None:
    topics = [unique_topic(events.PlacementEvent), unique_topic(events.NodeStatusEvent, compacted=True)]
    report = await ensure_topics(kafka_bootstrap, topics)
    assert report.created == [name for t in topics for name in (t.name, t.dlq)]
    configs = await described_configs(kafka_bootstrap, report.created)
    by_time, dlq, compacted, _ = (configs[name] for name in report.created)
    assert by_time["cleanup.policy"] == "delete" and by_time["retention.ms"] == DAY_MS
    assert dlq["cleanup.policy"] == "delete" and dlq["retention.ms"] == str(7 * int(DAY_MS))
    assert compacted["cleanup.policy"] == "compact" and compacted["delete.retention.ms"] == DAY_MS
    assert {c["min.insync.replicas"] for c in configs.values()} == {"1"}  # one broker: one copy, one in sync


async def test_reconcile_reports_a_topic_that_differs_and_what_the_broker_could_not_fix(kafka_bootstrap: str) -> None:
    topic = unique_topic(events.BindingEvent, partitions=3)
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:  # as every service made it before: broker-default retention, too few partitions
        await admin.create_topics([NewTopic(topic.name, 1, 1, topic_configs={"cleanup.policy": "delete"})])
    finally:
        await admin.close()
    report = await ensure_topics(kafka_bootstrap, [topic], reconcile=True)
    assert report.created == [topic.dlq]
    left = {(n.difference.setting, n.difference.actual, n.difference.wanted) for n in report.not_fixed}
    assert left == {("retention.ms", "unset", DAY_MS), ("min.insync.replicas", "unset", "1"), ("partitions", "1", "3")}
    # Tansu 0.6 has neither AlterConfigs nor CreatePartitions: the reason says which call failed.
    assert {n.why.split(":")[0] for n in report.not_fixed} == {"AlterConfigs", "CreatePartitions"}
    again = await ensure_topics(kafka_bootstrap, [topic], reconcile=True)
    assert again.created == [] and {str(n) for n in again.not_fixed} == {str(n) for n in report.not_fixed}
    as_wanted = unique_topic(events.BindingEvent)
    await ensure_topics(kafka_bootstrap, [as_wanted])
    assert await ensure_topics(kafka_bootstrap, [as_wanted], reconcile=True) == topic_admin.EnsureReport()


class RecordingAdmin:
    """The two calls Tansu lacks, answered as Kafka answers them."""

    def __init__(self) -> None:
        self.altered: list[tuple[str, dict[str, str]]] = []
        self.grown: dict[str, int] = {}

    async def alter_configs(self, resources: list[ConfigResource]) -> list[Any]:
        self.altered += [(r.name, dict(r.configs)) for r in resources]

        class Response:
            def to_object(self) -> dict[str, Any]:
                return {"resources": [{"error_code": 0, "error_message": None} for _ in resources]}

        return [Response()]

    async def create_partitions(self, partitions: dict[str, Any]) -> None:
        self.grown |= {name: p.total_count for name, p in partitions.items()}


async def test_a_fix_alters_the_whole_config_set_and_grows_partitions() -> None:
    topic = wanted()
    found = actual_of(topic, partitions=2, configs={**topic.configs, "retention.ms": "1"},
                      dynamic_configs={"retention.ms": "1", "segment.bytes": "1048576"})  # fmt: skip
    plan = plan_topics([topic], {topic.name: found})
    admin = RecordingAdmin()
    report = await topic_admin._fix(admin, plan)  # type: ignore[arg-type]
    assert admin.altered == [(topic.name, {**topic.configs, "segment.bytes": "1048576"})]
    assert admin.grown == {topic.name: 6}
    assert report.ok and {d.setting for d in report.fixed} == {"retention.ms", "partitions"}


async def run_topics_ensure(bootstrap: str, **env: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "topoplace.cli", "topics", "ensure",
        env={**os.environ, "KAFKA_BOOTSTRAP": bootstrap, **env},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_topics_ensure_exits_0_when_as_wanted_1_for_a_difference_left_2_for_bad_settings(
    fresh_broker: str,
) -> None:
    code, out, err = await run_topics_ensure(fresh_broker)
    assert (code, out) == (0, ""), err  # every topic was created as wanted
    admin = AIOKafkaAdminClient(bootstrap_servers=fresh_broker)
    await admin.start()
    try:  # placements as an old release or a hand-made topic left it: other retention, no cleanup policy
        await admin.delete_topics([schemas.topics.PLACEMENTS.name])
        await admin.create_topics([NewTopic(schemas.topics.PLACEMENTS.name, 6, 1, topic_configs={"retention.ms": "1"})])
    finally:
        await admin.close()
    code, out, err = await run_topics_ensure(fresh_broker)
    assert code == 1, err
    assert "differs placements: retention.ms is 1, wanted 86400000 (not fixed: AlterConfigs:" in out
    assert "3 difference(s) left" in err  # retention.ms, cleanup.policy and min.insync.replicas
    code, out, err = await run_topics_ensure(fresh_broker, TOPOPLACE_TOPIC_REPLICATION_FACTOR="2")
    assert code == 2 and "TOPOPLACE_TOPIC_REPLICATION_FACTOR: is 2, but the cluster reports 1 broker(s)" in err
    assert "Traceback" not in err
