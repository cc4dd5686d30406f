"""decode_event and latest_by_key: pure, no broker."""

from __future__ import annotations

import msgspec
import pytest
from opentelemetry.context import Context

import schemas.topics
from schemas import events
from schemas.topology import Device, Vendor
from topoplace.kafka.follower import latest_by_key
from topoplace.kafka.records import Received
from topoplace.kafka.wire import DecodeError, RejectReason, decode_event

TOPOLOGY = schemas.topics.TOPOLOGY_NODES


def topology_dict() -> dict[str, object]:
    event = events.NodeTopologyEvent(
        node="node-a",
        machine_type="dgx-h100",
        devices=(Device(index=0, uuid="GPU-0", vendor=Vendor.NVIDIA, model="H100", memory_mib=81559),),
    )
    return msgspec.to_builtins(event)  # type: ignore[no-any-return]


def test_a_valid_event_decodes_to_its_topic_struct() -> None:
    value = msgspec.json.encode(topology_dict())
    event = decode_event(TOPOLOGY, value)
    assert isinstance(event, events.NodeTopologyEvent)
    assert event.devices[0].memory_mib == 81559


def test_a_tombstone_is_none() -> None:
    assert decode_event(TOPOLOGY, None) is None


def test_unknown_fields_are_ignored_for_forward_compatibility() -> None:
    value = msgspec.json.encode({**topology_dict(), "added_later": 1})
    assert isinstance(decode_event(TOPOLOGY, value), events.NodeTopologyEvent)


def _with_device_field(**fields: object) -> dict[str, object]:
    data = topology_dict()
    device = dict(data["devices"][0])  # type: ignore[index]
    device.update(fields)
    return {**data, "devices": [device]}


@pytest.mark.parametrize(
    ("value", "kind", "starts"),
    [
        (b"{", RejectReason.MALFORMED_JSON, "value: not JSON"),
        (b"", RejectReason.MALFORMED_JSON, "value: not JSON"),
        (b"[]", RejectReason.INVALID_FIELD, "value: expected `object`"),
        (msgspec.json.encode({**topology_dict(), "node": 3}), RejectReason.INVALID_FIELD, "node: expected `str`"),
        (
            msgspec.json.encode(_with_device_field(memory_mib="80GiB")),
            RejectReason.INVALID_FIELD,
            "devices[0].memory_mib: expected `int`",
        ),
        (
            msgspec.json.encode({k: v for k, v in topology_dict().items() if k != "machine_type"}),
            RejectReason.INVALID_FIELD,
            "machine_type: required field is missing",
        ),
        (
            msgspec.json.encode({**topology_dict(), "schema_version": events.SCHEMA_VERSION + 1}),
            RejectReason.UNKNOWN_SCHEMA_VERSION,
            f"schema_version: unknown version {events.SCHEMA_VERSION + 1}",
        ),
        (
            # a newer version whose shape also changed is reported by its version
            msgspec.json.encode({"schema_version": events.SCHEMA_VERSION + 1, "nodes": []}),
            RejectReason.UNKNOWN_SCHEMA_VERSION,
            "schema_version:",
        ),
        (
            msgspec.json.encode({**topology_dict(), "schema_version": "1"}),
            RejectReason.INVALID_FIELD,
            "schema_version: expected `int`",
        ),
    ],
)
def test_bad_values_name_the_field_and_the_reason(value: bytes, kind: str, starts: str) -> None:
    with pytest.raises(DecodeError) as caught:
        decode_event(TOPOLOGY, value)
    assert caught.value.kind == kind
    assert caught.value.error.startswith(starts), caught.value.error


def _with_link(**fields: object) -> dict[str, object]:
    link = {"src": 0, "dst": 1, "nvlinks": 4}
    link.update(fields)
    return {**topology_dict(), "links": [link]}


@pytest.mark.parametrize(
    ("value", "starts"),
    [
        (_with_device_field(index=-1), "devices[0].index: expected `int` >= 0"),
        (_with_device_field(memory_mib=-80), "devices[0].memory_mib: expected `int` >= 0"),
        (_with_device_field(cores=-5), "devices[0].cores: expected `int` >= 0"),
        (_with_device_field(nvswitch_links=-1), "devices[0].nvswitch_links: expected `int` >= 0"),
        (_with_link(src=-1), "links[0].src: expected `int` >= 0"),
        (_with_link(dst=-2), "links[0].dst: expected `int` >= 0"),
        (_with_link(nvlinks=-4), "links[0].nvlinks: expected `int` >= 0"),
    ],
)
def test_negative_topology_numbers_are_rejected_with_the_field(value: dict[str, object], starts: str) -> None:
    with pytest.raises(DecodeError) as caught:
        decode_event(TOPOLOGY, msgspec.json.encode(value))
    assert caught.value.kind == RejectReason.INVALID_FIELD
    assert caught.value.error.startswith(starts), caught.value.error


def message(key: str | None, event: events.Event | None, offset: int) -> Received:
    return Received(
        topic="nodes.status",
        partition=0,
        offset=offset,
        key=key,
        event=event,
        trace_context=Context(),
        timestamp_ms=0,
    )


def test_latest_by_key_keeps_the_last_value_and_drops_tombstoned_keys() -> None:
    a1, a2 = events.NodeStatusEvent(node="a"), events.NodeStatusEvent(node="a", ready=False)
    b = events.NodeStatusEvent(node="b")
    view = latest_by_key(
        [
            message("a", a1, 0),
            message("b", b, 1),
            message("a", a2, 2),
            message("b", None, 3),
            message(None, b, 4),
            message("c", None, 5),
        ]
    )
    assert {k: m.event for k, m in view.items()} == {"a": a2}
    assert view["a"].offset == 2
