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
    from aiokafka.errors import KafkaError

    from schemas import topics
    from topoplace.broker import BrokerError, ensure_topics

    bootstrap = _bootstrap("ensure", "the embedded broker creates its topics itself")
    if bootstrap is None:
        return BAD_INPUT
    import asyncio

    settings = Settings.from_env()
    try:
        asyncio.run(ensure_topics(bootstrap, security=settings.kafka_security))
    except (KafkaError, OSError, BrokerError) as exc:  # Kafka away or refusing: one line, no traceback
        print(f"topoplace topics ensure: {bootstrap}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return NO_PLACE
    for name in topics.all_topic_names():
        print(name)
    return OK


def _list(args: argparse.Namespace) -> int:
    from schemas import topics

    for topic in topics.ALL:
        retention = "compacted" if topic.compacted else "by time"
        print(f"{topic.name:<18} {topic.event.__name__:<20} key={topic.key}; {retention}")
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
    sub.add_parser("ensure", help="create every topic and DLQ on KAFKA_BOOTSTRAP").set_defaults(func=_ensure)
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
