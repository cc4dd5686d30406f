"""The topics on the broker as schemas/topics.py says: created, checked and fixed.

Every service creates the topics missing at its start (`ensure_topics`), with the
settings of schemas/topics.py's table (partitions, cleanup policy, retention) and
the cluster's durability: a replication factor of min(3, brokers) and
min.insync.replicas of min(2, replication factor) unless configured
(`TopicDurability`). `topoplace topics ensure` also checks the topics that exist
(`reconcile=True`): a config that differs is altered, too few partitions are added
to, and a replication factor that differs is reported, never ignored (changing it
is a partition reassignment, an operator's decision). What to do is planned first,
by `plan_topics` (pure), then applied.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError

import schemas.topics
from schemas.topics import Topic, TopicSettings
from topoplace.config import TOPIC_MIN_INSYNC_REPLICAS, TOPIC_REPLICATION_FACTOR, ConfigError, TopicDurability
from topoplace.kafka.security import KafkaSecurity, client_options

log = logging.getLogger(__name__)

TOPIC_ALREADY_EXISTS = 36  # Kafka protocol error code
DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs' config_source of a value set on the topic itself
DEFAULT_REPLICATION_FACTOR = 3  # at most: fewer brokers, fewer copies
DEFAULT_MIN_INSYNC_REPLICAS = 2  # at most: a write is acknowledged once this many copies hold it
REPLICATION_NOT_FIXED = "a replication factor changes only by a partition reassignment (kafka-reassign-partitions)"


class BrokerError(RuntimeError):
    """A broker could not be found, started or reached, or refused to create topics."""


class WantedTopic(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    partitions: int  # at least
    replication_factor: int
    configs: dict[str, str]


class ActualTopic(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    partitions: int
    replication_factor: int  # the smallest over its partitions
    configs: dict[str, str]  # every config the broker describes
    dynamic_configs: dict[str, str] = {}  # those set on the topic itself: an AlterConfigs must keep them


class Difference(msgspec.Struct, frozen=True, kw_only=True):
    topic: str
    setting: str  # a config name, "partitions" or "replication factor"
    wanted: str
    actual: str
    fixable: bool

    def __str__(self) -> str:
        return f"{self.topic}: {self.setting} is {self.actual}, wanted {self.wanted}"


class TopicPlan(msgspec.Struct, frozen=True, kw_only=True):
    create: list[WantedTopic] = []
    alter: dict[str, dict[str, str]] = {}  # topic -> its whole set of dynamic configs to write
    grow: dict[str, int] = {}  # topic -> its new partition count
    differences: list[Difference] = []


class NotFixed(msgspec.Struct, frozen=True, kw_only=True):
    difference: Difference
    why: str

    def __str__(self) -> str:
        return f"{self.difference} (not fixed: {self.why})"


class EnsureReport(msgspec.Struct, frozen=True, kw_only=True):
    created: list[str] = []
    fixed: list[Difference] = []
    not_fixed: list[NotFixed] = []

    @property
    def ok(self) -> bool:
        return not self.not_fixed


def durability_for(durability: TopicDurability, brokers: int) -> tuple[int, int]:
    """(replication factor, min.insync.replicas) for a cluster of `brokers`; ConfigError if it cannot hold them."""
    replication_factor = durability.replication_factor or min(DEFAULT_REPLICATION_FACTOR, max(brokers, 1))
    if replication_factor > brokers:
        raise ConfigError(
            TOPIC_REPLICATION_FACTOR, f"is {replication_factor}, but the cluster reports {brokers} broker(s)"
        )
    min_insync = durability.min_insync_replicas or min(DEFAULT_MIN_INSYNC_REPLICAS, replication_factor)
    if min_insync > replication_factor:
        raise ConfigError(
            TOPIC_MIN_INSYNC_REPLICAS, f"is {min_insync}, more than the replication factor {replication_factor}"
        )
    return replication_factor, min_insync


def wanted_topics(table: Sequence[TopicSettings], replication_factor: int, min_insync: int) -> list[WantedTopic]:
    return [
        WantedTopic(
            name=row.name,
            partitions=row.partitions,
            replication_factor=replication_factor,
            configs={**row.configs(), "min.insync.replicas": str(min_insync)},
        )
        for row in table
    ]


def plan_topics(wanted: Sequence[WantedTopic], actual: Mapping[str, ActualTopic]) -> TopicPlan:
    """What to create, alter and grow so that the broker holds `wanted`; what cannot be fixed."""
    create: list[WantedTopic] = []
    alter: dict[str, dict[str, str]] = {}
    grow: dict[str, int] = {}
    differences: list[Difference] = []
    for topic in wanted:
        found = actual.get(topic.name)
        if found is None:
            create.append(topic)
            continue
        changed = {k: v for k, v in topic.configs.items() if not _same_config(k, found.configs.get(k), v)}
        for key, value in changed.items():
            differences.append(_difference(topic.name, key, value, found.configs.get(key, "unset"), fixable=True))
        if changed:
            alter[topic.name] = {**found.dynamic_configs, **topic.configs}
        if found.partitions < topic.partitions:  # more is kept: partitions never shrink
            differences.append(_difference(topic.name, "partitions", topic.partitions, found.partitions, fixable=True))
            grow[topic.name] = topic.partitions
        if found.replication_factor != topic.replication_factor:
            differences.append(
                _difference(
                    topic.name, "replication factor", topic.replication_factor, found.replication_factor, fixable=False
                )
            )
    return TopicPlan(create=create, alter=alter, grow=grow, differences=differences)


def _difference(topic: str, setting: str, wanted: object, actual: object, *, fixable: bool) -> Difference:
    return Difference(topic=topic, setting=setting, wanted=str(wanted), actual=str(actual), fixable=fixable)


def _same_config(key: str, actual: str | None, wanted: str) -> bool:
    if actual is None:
        return False
    if key == "cleanup.policy":  # a list: "compact,delete" is "delete,compact"
        return _policy(actual) == _policy(wanted)
    return actual.strip() == wanted.strip()


def _policy(value: str) -> frozenset[str]:
    return frozenset(p.strip().lower() for p in value.strip("[]").split(",") if p.strip())


async def ensure_topics(
    bootstrap: str,
    topics: Sequence[Topic] = schemas.topics.ALL,
    with_dlq: bool = True,
    *,
    durability: TopicDurability | None = None,
    security: KafkaSecurity | None = None,
    reconcile: bool = False,
) -> EnsureReport:
    """Create the topics that do not exist yet (idempotent); with `reconcile`, check and fix those that do."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="topoplace-admin", **client_options(security))
    await admin.start()
    try:
        brokers = len((await admin.describe_cluster())["brokers"])
        replication_factor, min_insync = durability_for(durability or TopicDurability(), brokers)
        table = schemas.topics.settings_table(tuple(topics), with_dlq)
        wanted = wanted_topics(table, replication_factor, min_insync)
        existing = set(await admin.list_topics())
        if reconcile:
            actual = await describe_topics(admin, [t.name for t in wanted if t.name in existing])
            plan = plan_topics(wanted, actual)
        else:
            plan = TopicPlan(create=[t for t in wanted if t.name not in existing])
        await _create(admin, plan.create)
        report = await _fix(admin, plan) if reconcile else EnsureReport()
        return EnsureReport(created=[t.name for t in plan.create], fixed=report.fixed, not_fixed=report.not_fixed)
    finally:
        await admin.close()


async def describe_topics(admin: AIOKafkaAdminClient, names: Sequence[str]) -> dict[str, ActualTopic]:
    """Partitions, replication factor and configs of existing topics."""
    if not names:
        return {}
    shapes: dict[str, tuple[int, int]] = {}
    for described in await admin.describe_topics(list(names)):
        partitions = described["partitions"]
        shapes[described["topic"]] = (len(partitions), min((len(p["replicas"]) for p in partitions), default=0))
    configs: dict[str, tuple[dict[str, str], dict[str, str]]] = {}
    resources = [ConfigResource(ConfigResourceType.TOPIC, name) for name in names]
    for response in await admin.describe_configs(resources):
        for resource in response.to_object()["resources"]:
            if resource["error_code"]:
                raise BrokerError(f"describing {resource['resource_name']}: {resource['error_message']}")
            configs[resource["resource_name"]] = _configs_of(resource["config_entries"])
    return {
        name: ActualTopic(
            name=name,
            partitions=shapes[name][0],
            replication_factor=shapes[name][1],
            configs=configs.get(name, ({}, {}))[0],
            dynamic_configs=configs.get(name, ({}, {}))[1],
        )
        for name in names
        if name in shapes
    }


def _configs_of(entries: list[dict[str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
    every: dict[str, str] = {}
    dynamic: dict[str, str] = {}
    for entry in entries:
        name, value = entry["config_names"], entry["config_value"]
        if value is None:  # sensitive: not described, not ours
            continue
        every[name] = value
        set_on_topic = (
            entry["config_source"] == DYNAMIC_TOPIC_CONFIG if "config_source" in entry else not entry["is_default"]
        )
        if set_on_topic:
            dynamic[name] = value
    return every, dynamic


async def _create(admin: AIOKafkaAdminClient, topics: Sequence[WantedTopic]) -> None:
    if not topics:
        return
    response = await admin.create_topics(
        [NewTopic(t.name, t.partitions, t.replication_factor, topic_configs=t.configs) for t in topics]
    )
    failures = [
        f"{entry[0]}: {(entry[2] if len(entry) > 2 else None) or f'error code {entry[1]}'}"
        for entry in getattr(response, "topic_errors", [])
        if entry[1] not in (0, TOPIC_ALREADY_EXISTS)  # another process may have won the race
    ]
    if failures:
        raise BrokerError("could not create topics: " + "; ".join(failures))
    log.info("topics.created", extra={"fields": {"topics": [t.name for t in topics]}})


async def _fix(admin: AIOKafkaAdminClient, plan: TopicPlan) -> EnsureReport:
    """Apply the plan's alterations and partition growth; each difference ends fixed or not, with why."""
    fixed: list[Difference] = []
    not_fixed = [NotFixed(difference=d, why=REPLICATION_NOT_FIXED) for d in plan.differences if not d.fixable]
    for topic, configs in plan.alter.items():
        why = await _alter(admin, topic, configs)
        ours = [d for d in plan.differences if d.topic == topic and d.fixable and d.setting != "partitions"]
        if why is None:
            fixed += ours
        else:
            not_fixed += [NotFixed(difference=d, why=why) for d in ours]
    for topic, count in plan.grow.items():
        why = await _grow(admin, topic, count)
        ours = [d for d in plan.differences if d.topic == topic and d.setting == "partitions"]
        if why is None:
            fixed += ours
        else:
            not_fixed += [NotFixed(difference=d, why=why) for d in ours]
    if fixed:
        log.info("topics.fixed", extra={"fields": {"differences": [str(d) for d in fixed]}})
    return EnsureReport(fixed=fixed, not_fixed=not_fixed)


async def _alter(admin: AIOKafkaAdminClient, topic: str, configs: dict[str, str]) -> str | None:
    try:
        responses = await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs)])
    except KafkaError as exc:
        return f"AlterConfigs: {type(exc).__name__}: {exc}"
    for response in responses:
        for resource in response.to_object()["resources"]:
            if resource["error_code"]:
                message = resource["error_message"] or f"error code {resource['error_code']}"
                return f"AlterConfigs: {message}"
    return None


async def _grow(admin: AIOKafkaAdminClient, topic: str, count: int) -> str | None:
    try:
        await admin.create_partitions({topic: NewPartitions(count)})
    except KafkaError as exc:
        return f"CreatePartitions: {type(exc).__name__}: {exc}"
    return None
