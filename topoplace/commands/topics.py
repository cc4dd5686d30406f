"""`topoplace topics ensure|list|tail`: create, list or follow the topics on the configured Kafka."""

from __future__ import annotations

import argparse
import sys

from topoplace.commands.exit_codes import BAD_INPUT, NO_PLACE, OK
from topoplace.config import Settings

TAIL_STARTS = ("beginning", "end")


def _bootstrap(command: str, why: str) -> str | None:
    settings = Settings.from_env()
    if not settings.kafka_bootstrap:
        print(f"topoplace topics {command}: KAFKA_BOOTSTRAP is not set: {why}", file=sys.stderr)
        return None
    return settings.kafka_bootstrap


def _ensure(args: argparse.Namespace) -> int:
    """Create what is missing, fix what differs; 0 all as wanted, 1 a difference left, 2 bad input."""
    import asyncio

    from aiokafka.errors import KafkaError

    from topoplace.kafka.admin import BrokerError, ensure_topics

    settings = Settings.from_env()  # a bad setting: the CLI says which and exits 2
    bootstrap = settings.kafka_bootstrap
    if not bootstrap:
        print("topoplace topics ensure: KAFKA_BOOTSTRAP is not set: the embedded broker creates its topics itself",
              file=sys.stderr)  # fmt: skip
        return BAD_INPUT
    ensure = ensure_topics(
        bootstrap, security=settings.kafka_security, durability=settings.topic_durability, reconcile=True
    )
    try:
        report = asyncio.run(ensure)  # a replication factor the cluster cannot hold: ConfigError, exit 2
    except (KafkaError, OSError, BrokerError) as exc:  # Kafka away or refusing: one line, no traceback
        print(f"topoplace topics ensure: {bootstrap}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return NO_PLACE
    for name in report.created:
        print(f"created {name}")
    for difference in report.fixed:
        print(f"fixed {difference}")
    for not_fixed in report.not_fixed:
        print(f"differs {not_fixed}")
    if not report.ok:
        print(f"topoplace topics ensure: {len(report.not_fixed)} difference(s) left", file=sys.stderr)
        return NO_PLACE
    return OK


def _list(args: argparse.Namespace) -> int:
    from schemas import topics

    for topic in topics.ALL:
        settings = topic.settings()
        retention = "compacted" if settings.retention_ms is None else f"{settings.retention_ms // topics.HOUR_MS} h"
        partitions = f"{settings.partitions} partitions"
        print(f"{topic.name:<18} {topic.event.__name__:<20} key={topic.key}; {retention}; {partitions}")
    return OK


def _tail(args: argparse.Namespace) -> int:
    import msgspec

    from topoplace.commands.signals import run_until_signalled
    from topoplace.tail import Start, TailLine, tail, topic_named

    bootstrap = _bootstrap("tail", "name the broker to read from")
    if bootstrap is None:
        return BAD_INPUT
    try:
        topic = topic_named(args.topic)
    except ValueError as exc:
        print(f"topoplace topics tail: {exc}", file=sys.stderr)
        return BAD_INPUT
    encoder = msgspec.json.Encoder()

    def emit(line: TailLine) -> None:
        sys.stdout.write(encoder.encode(line).decode() + "\n")
        sys.stdout.flush()  # one line as each event arrives, also into a pipe

    try:
        run_until_signalled(lambda stop: tail(bootstrap, topic, Start(args.start), emit, stop))
    except ValueError as exc:  # the topic is not on the broker
        print(f"topoplace topics tail: {exc}", file=sys.stderr)
        return BAD_INPUT
    return OK


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("topics", help="create, list or follow the topics")
    sub = parser.add_subparsers(dest="topics_command", required=True)
    sub.add_parser(
        "ensure",
        help="create every topic and DLQ on KAFKA_BOOTSTRAP; report and fix those whose settings differ",
        description="Creates the topics missing, with the partitions, cleanup policy and retention of "
        "`topoplace topics list`, a replication factor of TOPOPLACE_TOPIC_REPLICATION_FACTOR (default: "
        "min(3, brokers)) and min.insync.replicas of TOPOPLACE_TOPIC_MIN_INSYNC_REPLICAS (default: min(2, "
        "replication factor)). A topic that exists with other configs is altered, one with fewer partitions "
        "grows; a different replication factor is reported. Prints one line per topic created, difference "
        "fixed and difference left. Exit 0: every topic as wanted; 1: a difference left or Kafka away; "
        "2: bad settings.",
    ).set_defaults(func=_ensure)
    sub.add_parser("list", help="the topics, their events, keys and retention").set_defaults(func=_list)
    tail = sub.add_parser(
        "tail",
        help="print each event of a topic on KAFKA_BOOTSTRAP as it arrives, one JSON line each",
        description="Reads every partition outside any consumer group (no offsets are committed). "
        "Each line: topic, partition, offset, key, timestamp_ms and the decoded event, or `error` "
        "when the value is not an event of the topic. Runs until SIGINT/SIGTERM.",
    )
    tail.add_argument("topic", help="a topic name (see `topoplace topics list`) or its .dlq")
    tail.add_argument(
        "--from", dest="start", choices=TAIL_STARTS, default="end", help="start at the oldest message or new ones only"
    )
    tail.set_defaults(func=_tail)
