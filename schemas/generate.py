"""Generate the JSON Schema of every topic (and of the engine's snapshot input).

`topoplace schemas generate` writes them into schemas/json/; `topoplace schemas
check` (and a test) fails when the checked-in files drift from the Structs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from schemas import events, topics

JSON_DIR = Path(__file__).parent / "json"


def _render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def _topic_schema(topic: topics.Topic) -> dict[str, Any]:
    schema = msgspec.json.schema(topic.event)
    schema["title"] = topic.name
    schema["description"] = (
        f"{topic.description} Key: {topic.key}. "
        f"{'Compacted (the last value per key is the state).' if topic.compacted else 'Retained by time.'}"
    )
    return schema


def _extra_schemas() -> dict[str, Callable[[], dict[str, Any]]]:
    # Imported lazily: the engine is a separate package that the event contract must not need.
    def snapshot() -> dict[str, Any]:
        from engine import PlaceInput

        schema = msgspec.json.schema(PlaceInput)
        schema["title"] = "engine snapshot"
        schema["description"] = "Input of `topoplace engine place --snapshot FILE`."
        return schema

    def gang_decision() -> dict[str, Any]:
        from engine.decide.gang import GangDecision

        schema = msgspec.json.schema(GangDecision)
        schema["title"] = "engine gang decision"
        schema["description"] = (
            "Output of `topoplace engine place --snapshot FILE` for a snapshot with a `gang` "
            "(plus `problems`: what the network tree could not honour)."
        )
        return schema

    return {"engine-snapshot": snapshot, "engine-gang-decision": gang_decision}


def render_all() -> dict[str, str]:
    """File name -> rendered JSON Schema, for every topic, its DLQ envelope and the snapshot."""
    out: dict[str, str] = {}
    for topic in topics.ALL:
        out[f"{topic.name}.schema.json"] = _render(_topic_schema(topic))
    dlq = msgspec.json.schema(events.DeadLetterEvent)
    dlq["title"] = "<topic>.dlq"
    dlq["description"] = "Dead letters of any topic: the original message and the reason."
    out["dlq.schema.json"] = _render(dlq)
    for name, build in _extra_schemas().items():
        out[f"{name}.schema.json"] = _render(build())
    return out


def write(directory: Path = JSON_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render_all().items():
        path = directory / name
        path.write_text(text)
        written.append(path)
    return written


def drift(directory: Path = JSON_DIR) -> list[str]:
    """Names of the files that differ from what the code generates (missing or stale)."""
    wanted = render_all()
    stale = [n for n, text in wanted.items() if not (directory / n).exists() or (directory / n).read_text() != text]
    extra = [p.name for p in directory.glob("*.schema.json") if p.name not in wanted]
    return sorted(stale + extra)
