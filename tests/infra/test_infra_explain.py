"""`topoplace explain NAMESPACE/NAME`: the pod's latest decision and its binding, from the topics."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest

from schemas import topics
from schemas.enforcement import Enforcement
from schemas.events import (
    Alternative,
    BindingEvent,
    BindingOutcome,
    DeviceAssignment,
    GangPlacementEvent,
    GangTierRefusal,
    PlacementEvent,
    PlacementOutcome,
)
from topoplace.cli import main
from topoplace.kafka.producer import EventProducer
from topoplace.pod_story import parse_pod, pod_story, story_lines


def placement(name: str, uid: str, decision: str, *, at: float, node: str = "node-a") -> PlacementEvent:
    return PlacementEvent(
        decision_id=decision, uid=uid, namespace="team", name=name, pod_resource_version="1",
        outcome=PlacementOutcome.PLACED, node=node,
        devices=(
            DeviceAssignment(index=0, uuid="GPU-aaa"),
            DeviceAssignment(index=1, uuid="GPU-bbb", memory_mib=4096, cores=30),
        ),
        score=12.5, score_parts={"nvlink": 10.0, "numa": 2.5}, enforcement=Enforcement.HAMI, decided_at=at,
        alternatives=(Alternative(node="node-b", score=11.0, reason="score 11 < 12.5 on node-a (nvlink 8 vs 10)"),),
    )  # fmt: skip


def binding(uid: str, decision: str, outcome: BindingOutcome, reason: str = "") -> BindingEvent:
    return BindingEvent(
        decision_id=decision, uid=uid, namespace="team", name="x", outcome=outcome, node="node-a", reason=reason
    )


async def publish(bootstrap: str, *messages: tuple[topics.Topic, str, object]) -> None:
    async with EventProducer(bootstrap, service="test-explain") as producer:
        for topic, key, event in messages:
            await producer.send(topic, key, event)  # type: ignore[arg-type]


def test_the_pod_is_explained_from_its_latest_decision_and_its_binding(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    name, uid = f"web-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
    old, new = placement(name, uid, "d-old", at=1.0, node="node-c"), placement(name, uid, "d-new", at=2.0)
    asyncio.run(
        publish(
            kafka_bootstrap,
            (topics.PLACEMENTS, uid, old),
            (topics.PLACEMENTS, uid, new),
            (topics.BINDINGS, uid, binding(uid, "d-old", BindingOutcome.CONFLICT, "devices taken")),
            (topics.BINDINGS, uid, binding(uid, "d-new", BindingOutcome.BOUND)),
        )
    )
    monkeypatch.setenv("KAFKA_BOOTSTRAP", kafka_bootstrap)
    assert main(["explain", f"team/{name}"]) == 0
    text = capsys.readouterr().out
    assert "decision d-new" in text and "placed on node-a, enforced by hami" in text
    assert "GPU-aaa (whole)" in text and "GPU-bbb (30% cores, 4096 MiB)" in text
    assert "score 12.5 (numa 2.5, nvlink 10)" in text
    assert "node-b (score 11): score 11 < 12.5 on node-a (nvlink 8 vs 10)" in text
    assert "binding: bound on node-a" in text

    assert main(["explain", f"team/{name}", "--json"]) == 0
    story = json.loads(capsys.readouterr().out)
    assert story["decision_id"] == "d-new" and story["node"] == "node-a"
    assert story["binding"]["outcome"] == "bound"
    assert story["alternatives"][0]["node"] == "node-b"
    assert story["devices"][1]["uuid"] == "GPU-bbb"


def test_a_gang_member_names_its_gang_hypernode_and_tier(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    name, uid = f"worker-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
    gang = GangPlacementEvent(
        decision_id="g1", name="team/train", namespace="team", outcome=PlacementOutcome.PLACED,
        members=(placement(name, uid, "d-member", at=3.0),), hypernode="rack-1", tier=1,
    )  # fmt: skip
    asyncio.run(publish(kafka_bootstrap, (topics.GANG_PLACEMENTS, "team/train", gang)))
    monkeypatch.setenv("KAFKA_BOOTSTRAP", kafka_bootstrap)
    assert main(["explain", f"team/{name}"]) == 0
    text = capsys.readouterr().out
    assert "gang team/train on hypernode rack-1 (tier 1)" in text
    assert "binding: no answer from the binder yet" in text


def test_a_gang_member_placed_above_the_lowest_tier_says_why_each_lower_tier_was_refused() -> None:
    refused = GangTierRefusal(tier=1, tier_name="rack", reason="at most 3 of 4 pending member(s) fit in one hypernode")
    gang = GangPlacementEvent(
        decision_id="g1", name="team/train", namespace="team", outcome=PlacementOutcome.PLACED,
        members=(placement("w-0", "u-0", "d-member", at=3.0),), hypernode="spine-1", tier=2, refused_tiers=(refused,),
    )  # fmt: skip
    story = pod_story("team", "w-0", [], [gang], [])
    assert story is not None and story.gang is not None and story.gang.refused_tiers == (refused,)
    lines = story_lines(story)
    at = lines.index("gang team/train on hypernode spine-1 (tier 2)")
    assert lines[at + 1] == "  refused tier 1 (rack): at most 3 of 4 pending member(s) fit in one hypernode"


def test_an_unknown_pod_is_one_line_and_exit_1(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP", kafka_bootstrap)
    assert main(["explain", f"team/nobody-{uuid.uuid4().hex}"]) == 1
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "no decision for pod team/nobody-" in out


def test_without_kafka_bootstrap_it_says_so_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KAFKA_BOOTSTRAP", raising=False)
    assert main(["explain", "team/web"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "KAFKA_BOOTSTRAP is not set" in err


@pytest.mark.parametrize("text", ["web", "/web", "team/", "a/b/c"])
def test_a_pod_not_written_namespace_slash_name_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="pod: expected NAMESPACE/NAME"):
        parse_pod(text)


def test_an_unschedulable_pod_says_why() -> None:
    pending = PlacementEvent(
        decision_id="d", uid="u", namespace="team", name="big", pod_resource_version="1",
        outcome=PlacementOutcome.UNSCHEDULABLE, reason="0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
    )  # fmt: skip
    story = pod_story("team", "big", [pending], [], [])
    assert story is not None
    assert "unschedulable: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu." in story_lines(story)
    assert pod_story("team", "other", [pending], [], []) is None


async def publish_stamped(bootstrap: str, topic: topics.Topic, key: str, event: object, timestamp_ms: int) -> None:
    """One event with the producer timestamp given, as a placer whose decision is that old left it."""
    from aiokafka import AIOKafkaProducer

    from topoplace.kafka.wire import encode_event

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(
            topic.name,
            encode_event(event),  # type: ignore[arg-type]
            key=key.encode(),
            timestamp_ms=timestamp_ms,
        )
    finally:
        await producer.stop()


def test_decisions_older_than_since_are_not_read(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    name, uid = f"old-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
    two_hours_ago = time.time() - 7200
    old = placement(name, uid, "d-two-hours-ago", at=two_hours_ago)
    asyncio.run(publish_stamped(kafka_bootstrap, topics.PLACEMENTS, "node-a", old, int(two_hours_ago * 1000)))
    monkeypatch.setenv("KAFKA_BOOTSTRAP", kafka_bootstrap)
    assert main(["explain", f"team/{name}"]) == 1
    out = capsys.readouterr().out
    assert "no decision for pod team/" in out and "in the last 3600 s" in out and "--since" in out
    assert main(["explain", f"team/{name}", "--since", "10800"]) == 0
    assert "decision d-two-hours-ago" in capsys.readouterr().out


def test_at_most_the_last_messages_of_each_partition_are_read(
    fresh_broker: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    name, uid = f"early-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
    later = [(topics.PLACEMENTS, "node-a", placement(f"later-{i}", str(i), f"d-{i}", at=5.0)) for i in range(4)]
    asyncio.run(publish(fresh_broker, (topics.PLACEMENTS, "node-a", placement(name, uid, "d-early", at=4.0)), *later))
    monkeypatch.setenv("KAFKA_BOOTSTRAP", fresh_broker)
    assert main(["explain", f"team/{name}", "--last", "4"]) == 1
    assert main(["explain", f"team/{name}", "--last", "5"]) == 0
    assert "decision d-early" in capsys.readouterr().out


def test_the_binders_answer_is_read_from_the_decision_on(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An answer older than the decision (by more than the clocks may disagree) is not this decision's."""
    name, uid = f"answered-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
    now = time.time()
    asyncio.run(publish(kafka_bootstrap, (topics.PLACEMENTS, uid, placement(name, uid, f"d-{uid}", at=now))))
    stale = binding(uid, f"d-{uid}", BindingOutcome.CONFLICT, "from a clock an hour behind")
    asyncio.run(publish_stamped(kafka_bootstrap, topics.BINDINGS, uid, stale, int((now - 3000) * 1000)))
    monkeypatch.setenv("KAFKA_BOOTSTRAP", kafka_bootstrap)
    assert main(["explain", f"team/{name}"]) == 0
    assert "binding: no answer from the binder yet" in capsys.readouterr().out
    asyncio.run(publish(kafka_bootstrap, (topics.BINDINGS, uid, binding(uid, f"d-{uid}", BindingOutcome.BOUND))))
    assert main(["explain", f"team/{name}"]) == 0
    assert "binding: bound on node-a" in capsys.readouterr().out
