"""`topoplace explain NAMESPACE/NAME`: why a pod is where it is, from the placer's published decisions."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, TypeVar

from topoplace.commands.exit_codes import BAD_INPUT, NO_PLACE, OK
from topoplace.commands.options import positive_float
from topoplace.config import Settings

if TYPE_CHECKING:  # the command's imports stay lazy: `topoplace --help` loads no Kafka client
    from schemas.events import BindingEvent, Event, GangPlacementEvent, PlacementEvent
    from schemas.topics import Topic

E = TypeVar("E", bound="Event")

READ_LIMIT_S = 30.0  # how long reading the topics up to their end may take


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "explain",
        help="why a pod is where it is: its node, devices, scores, the alternatives and the binding",
        description="Reads placements, gangs.placements and bindings from the beginning on KAFKA_BOOTSTRAP "
        "and explains the pod's latest decision.",
    )
    parser.add_argument("pod", help="NAMESPACE/NAME")
    parser.add_argument("--json", action="store_true", help="print the explanation as JSON")
    parser.add_argument(
        "--timeout", type=positive_float, default=READ_LIMIT_S, help="seconds allowed for reading the topics"
    )
    parser.set_defaults(func=_explain)


def _explain(args: argparse.Namespace) -> int:
    import asyncio

    import msgspec
    from aiokafka.errors import KafkaError

    from topoplace.pod_story import parse_pod, pod_story, story_lines

    try:
        namespace, name = parse_pod(args.pod)
    except ValueError as exc:
        print(f"topoplace explain: {exc}", file=sys.stderr)
        return BAD_INPUT
    settings = Settings.from_env()
    if not settings.kafka_bootstrap:
        print("topoplace explain: KAFKA_BOOTSTRAP is not set: name the broker the placer publishes to", file=sys.stderr)
        return BAD_INPUT
    try:
        placements, gangs, bindings = asyncio.run(_read(settings, args.timeout))
    except (KafkaError, OSError, TimeoutError, ValueError) as exc:  # Kafka away or slow: one line
        print(f"topoplace explain: {settings.kafka_bootstrap}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return NO_PLACE
    story = pod_story(namespace, name, placements, gangs, bindings)
    if story is None:
        print(f"topoplace explain: no decision for pod {namespace}/{name} in placements or gangs.placements")
        return NO_PLACE
    if args.json:
        print(msgspec.json.encode(story).decode())
    else:
        print("\n".join(story_lines(story)))
    return OK


async def _read(
    settings: Settings, timeout: float
) -> tuple[list[PlacementEvent], list[GangPlacementEvent], list[BindingEvent]]:
    import asyncio

    from schemas import topics
    from schemas.events import BindingEvent, GangPlacementEvent, PlacementEvent
    from topoplace.kafka.follower import read_compacted

    bootstrap = settings.kafka_bootstrap
    assert bootstrap is not None

    async def events(topic: Topic, kind: type[E]) -> list[E]:
        received = await read_compacted(
            bootstrap, topic, service="topoplace-explain", timeout=timeout, security=settings.kafka_security
        )
        return [m.event for m in received if isinstance(m.event, kind)]

    return await asyncio.gather(
        events(topics.PLACEMENTS, PlacementEvent),
        events(topics.GANG_PLACEMENTS, GangPlacementEvent),
        events(topics.BINDINGS, BindingEvent),
    )
