"""The checked-in JSON Schema must be what the Structs generate; the docs must list every topic."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import msgspec
import pytest

from schemas import events, generate, topics
from schemas.topology import Device, Vendor

ROOT = Path(__file__).resolve().parents[2]


def test_checked_in_schemas_match_the_code() -> None:
    assert generate.drift() == [], "run `topoplace schemas generate` and commit schemas/json/"


def test_drift_is_detected(tmp_path: Path) -> None:
    generate.write(tmp_path)
    assert generate.drift(tmp_path) == []
    victim = tmp_path / "placements.schema.json"
    victim.write_text(victim.read_text().replace('"decision_id"', '"decision"', 1))
    assert generate.drift(tmp_path) == ["placements.schema.json"]


def test_every_topic_has_a_schema_and_a_versioned_event() -> None:
    rendered = generate.render_all()
    for topic in topics.ALL:
        schema = json.loads(rendered[f"{topic.name}.schema.json"])
        event_def = schema["$defs"][topic.event.__name__]
        assert "schema_version" in event_def["properties"], topic.name
    assert "dlq.schema.json" in rendered


def test_an_encoded_event_validates_against_its_published_schema() -> None:
    device = Device(index=0, uuid="GPU-0", vendor=Vendor.NVIDIA, model="H100", memory_mib=81559)
    event = events.NodeTopologyEvent(node="n1", machine_type="dgx-h100", devices=(device,))
    schema = json.loads(generate.render_all()["topology.nodes.schema.json"])
    jsonschema.validate(json.loads(msgspec.json.encode(event)), schema)
    bad = json.loads(msgspec.json.encode(event))
    bad["devices"][0]["memory_mib"] = "lots"
    with pytest.raises(jsonschema.ValidationError) as info:
        jsonschema.validate(bad, schema)
    assert list(info.value.absolute_path) == ["devices", 0, "memory_mib"]


def test_topics_doc_lists_every_topic() -> None:
    doc = (ROOT / "docs" / "topics.md").read_text()
    for topic in topics.ALL:
        assert f"`{topic.name}`" in doc, topic.name
        assert topic.event.__name__ in doc, topic.event.__name__
