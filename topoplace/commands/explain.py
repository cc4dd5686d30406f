"""`topoplace explain NAMESPACE/NAME`: why a pod is where it is, from the placer's published decisions."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, TypeVar

from topoplace.commands.exit_codes import BAD_INPUT, NO_PLACE, OK
from topoplace.commands.options import positive_float, positive_int
from topoplace.config import Settings

if TYPE_CHECKING:  # the command's imports stay lazy: `topoplace --help` loads no Kafka client
    from schemas.events import BindingEvent, Event, GangPlacementEvent, PlacementEvent
    from schemas.topics import Topic

E = TypeVar("E", bound="Event")

READ_LIMIT_S = 30.0  # how long reading the topics up to their end may take
SINCE_S = 3600.0  # how far back decisions are looked for, unless asked otherwise
LAST_MESSAGES = 100_000  # per partition: what one question may cost, however busy the topics
# The binder's clock may be behind the placer's: its answer to a decision is looked for from
# this long before the decision was made.
CLOCK_SKEW_S = 300.0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "explain",
        help="why a pod is where it is: its node, devices, scores, the alternatives and the binding",
        description="Reads the decisions of the last --since seconds from placements and gangs.placements on "
        "KAFKA_BOOTSTRAP (Kafka's offsets by time; at most --last messages per partition), then bindings from "
        "the pod's latest decision on, and explains that decision.",
    )
    parser.add_argument("pod", help="NAMESPACE/NAME")
    parser.add_argument("--json", action="store_true", help="print the explanation as JSON")
    parser.add_argument(
        "--timeout", type=positive_float, default=READ_LIMIT_S, help="seconds allowed for reading the topics"
    )
    parser.add_argument(
        "--since",
        type=positive_float,
        default=SINCE_S,
        metavar="SECONDS",
        help=f"look for decisions made in the last SECONDS (default {SINCE_S:g}; the topics keep a day)",
    )
    parser.add_argument(
        "--last",
        type=positive_int,
        default=LAST_MESSAGES,
        metavar="N",
        help=f"read at most the last N messages of each partition (default {LAST_MESSAGES})",
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
        placements, gangs, bindings = asyncio.run(_read(settings, args, namespace, name))
    except (KafkaError, OSError, TimeoutError, ValueError) as exc:  # Kafka away or slow: one line
        print(f"topoplace explain: {settings.kafka_bootstrap}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return NO_PLACE
    story = pod_story(namespace, name, placements, gangs, bindings)
    if story is None:
        print(
            f"topoplace explain: no decision for pod {namespace}/{name} in the last {args.since:g} s of placements "
            "or gangs.placements (--since looks further back)"
        )
        return NO_PLACE
    if args.json:
        print(msgspec.json.encode(story).decode())
    else:
        print("\n".join(story_lines(story)))
    return OK


async def _read(
    settings: Settings, args: argparse.Namespace, namespace: str, name: str
) -> tuple[list[PlacementEvent], list[GangPlacementEvent], list[BindingEvent]]:
    """The decisions of the window, then the binder's answers from the pod's latest decision on."""
    import asyncio
    import time

    from schemas import topics
    from schemas.events import BindingEvent, GangPlacementEvent, PlacementEvent
    from topoplace.kafka.window import Window, read_window
    from topoplace.pod_story import pod_story

    bootstrap = settings.kafka_bootstrap
    assert bootstrap is not None
    deadline = time.monotonic() + args.timeout

    async def events(topic: Topic, kind: type[E], since_s: float) -> list[E]:
        window = Window(since_ms=int(max(0.0, since_s * 1000)), last=args.last)
        left = max(0.0, deadline - time.monotonic())
        received = await read_window(
            bootstrap, [topic], window, service="topoplace-explain", timeout=left, security=settings.kafka_security
        )
        return [m.event for m in received if isinstance(m.event, kind)]

    since = time.time() - args.since
    placements, gangs = await asyncio.gather(
        events(topics.PLACEMENTS, PlacementEvent, since), events(topics.GANG_PLACEMENTS, GangPlacementEvent, since)
    )
    story = pod_story(namespace, name, placements, gangs, [])
    if story is None:
        return placements, gangs, []
    answered_since = max(since, story.decided_at - CLOCK_SKEW_S)
    return placements, gangs, await events(topics.BINDINGS, BindingEvent, answered_since)
