"""`topoplace topics ensure|list`: create every topic (and its DLQ) on the configured Kafka."""

from __future__ import annotations

import argparse
import asyncio
import sys

from aiokafka.errors import KafkaError

from schemas import topics
from topoplace.broker import BrokerError, ensure_topics
from topoplace.config import Settings


def _ensure(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    if not settings.kafka_bootstrap:
        print("KAFKA_BOOTSTRAP is not set: the embedded broker creates its topics itself", file=sys.stderr)
        return 2
    try:
        asyncio.run(ensure_topics(settings.kafka_bootstrap, security=settings.kafka_security))
    except (KafkaError, OSError, BrokerError) as exc:  # Kafka away or refusing: one line, no traceback
        print(f"topoplace topics ensure: {settings.kafka_bootstrap}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    for name in topics.all_topic_names():
        print(name)
    return 0


def _list(args: argparse.Namespace) -> int:
    for topic in topics.ALL:
        retention = "compacted" if topic.compacted else "by time"
        print(f"{topic.name:<18} {topic.event.__name__:<20} key={topic.key}; {retention}")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("topics", help="create or list the topics")
    sub = parser.add_subparsers(dest="topics_command", required=True)
    sub.add_parser("ensure", help="create every topic and DLQ on KAFKA_BOOTSTRAP").set_defaults(func=_ensure)
    sub.add_parser("list", help="the topics, their events, keys and retention").set_defaults(func=_list)
