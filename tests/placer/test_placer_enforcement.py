"""The enforcement chosen per node: label, else HAMi detected, else the configured default."""

from __future__ import annotations

import pytest
from scripted_engine import ScriptedEngine

from schemas.enforcement import (
    CHOICES,
    ENFORCEMENT_LABEL,
    HAMI_REGISTER_ANNOTATION,
    Enforcement,
    EnforcementChoice,
    node_enforcement,
)
from schemas.events import NodeStatusEvent
from services.placer.view import ClusterView
from topoplace.config import ENFORCEMENT, ENFORCEMENT_CHOICES, ConfigError, Settings

HAMI_NODE = {HAMI_REGISTER_ANNOTATION: "[]"}


@pytest.mark.parametrize(
    ("labels", "annotations", "default", "expected"),
    [
        ({ENFORCEMENT_LABEL: "dra"}, HAMI_NODE, None, (Enforcement.DRA, EnforcementChoice.LABEL)),
        ({ENFORCEMENT_LABEL: "device-plugin"}, HAMI_NODE, None, (Enforcement.DEVICE_PLUGIN, EnforcementChoice.LABEL)),
        ({ENFORCEMENT_LABEL: "HAMi"}, {}, None, (Enforcement.HAMI, EnforcementChoice.LABEL)),
        ({ENFORCEMENT_LABEL: "auto"}, HAMI_NODE, None, (Enforcement.HAMI, EnforcementChoice.DETECTED)),
        ({ENFORCEMENT_LABEL: "bogus"}, {}, Enforcement.DRA, (Enforcement.DRA, EnforcementChoice.DEFAULT)),
        ({}, HAMI_NODE, Enforcement.DEVICE_PLUGIN, (Enforcement.HAMI, EnforcementChoice.DETECTED)),
        ({}, {}, Enforcement.HAMI, (Enforcement.HAMI, EnforcementChoice.DEFAULT)),
        ({}, {}, None, (Enforcement.DEVICE_PLUGIN, EnforcementChoice.DEFAULT)),
    ],
)
def test_node_enforcement(
    labels: dict[str, str],
    annotations: dict[str, str],
    default: Enforcement | None,
    expected: tuple[Enforcement, EnforcementChoice],
) -> None:
    assert node_enforcement(labels, annotations, default) == expected


def test_the_view_reads_it_from_the_nodes_status() -> None:
    view = ClusterView()
    view.apply(NodeStatusEvent(node="plain", labels={}, annotations={}))
    view.apply(NodeStatusEvent(node="hami", annotations=HAMI_NODE))
    view.apply(NodeStatusEvent(node="pool-b", labels={ENFORCEMENT_LABEL: "dra"}))
    assert [view.enforcement_of(n) for n in ("plain", "hami", "pool-b", "unknown")] == [
        Enforcement.DEVICE_PLUGIN,
        Enforcement.HAMI,
        Enforcement.DRA,
        Enforcement.DEVICE_PLUGIN,
    ]
    view.default_enforcement = Enforcement.HAMI
    assert view.enforcement_of("plain") is Enforcement.HAMI


def test_setting() -> None:
    assert Settings.from_env({}).enforcement is None
    assert Settings.from_env({ENFORCEMENT: "auto"}).enforcement is None
    assert Settings.from_env({ENFORCEMENT: "hami"}).enforcement == Enforcement.HAMI
    assert ENFORCEMENT_CHOICES == CHOICES  # the settings' copy of the names
    with pytest.raises(
        ConfigError, match="TOPOPLACE_ENFORCEMENT: must be one of auto, dra, hami, device-plugin, got 'nvidia'"
    ):
        Settings.from_env({ENFORCEMENT: "nvidia"})


def test_each_placement_carries_its_nodes_enforcement() -> None:
    from placer_builders import first_fit, pending, status, topology

    from services.placer.decide import Decider

    decider = Decider(engine=ScriptedEngine(first_fit), default_enforcement=Enforcement.DEVICE_PLUGIN)
    decider.on_event(topology("hami-node", 1))
    decider.on_event(status("hami-node", annotations=HAMI_NODE))
    decider.on_event(topology("plain-node", 1))
    decider.on_event(status("plain-node"))
    first = decider.on_pending(pending("p1")).placement
    second = decider.on_pending(pending("p2")).placement
    assert first is not None and second is not None
    assert {first.node: first.enforcement, second.node: second.enforcement} == {
        "hami-node": Enforcement.HAMI,
        "plain-node": Enforcement.DEVICE_PLUGIN,
    }
