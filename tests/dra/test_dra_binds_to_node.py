"""bindsToNode (KEP-5007, gate DRADeviceBindingConditions): the claim stays on the node it was allocated for.

As the API documents it: with `bindsToNode: true` on an allocated device, the scheduler sets
`status.allocation.nodeSelector` to match the node where the allocation was made (one term,
field `metadata.name` In [node]), even for a network-attached device whose slice selects many
nodes (`allNodes`, `nodeSelector`). Without it, or with the gate off (not read, as upstream),
the slices' own node selection stands.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from dra_builders import NODE, claim, device, device_class, exact, slice_

from engine.node.dra import AllocationInput, CelPrograms, Features, ResourceSlice, allocate

ZONE = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}
ON_NODE_1 = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}


def node_selector(slices: list[ResourceSlice], features: Features) -> dict[str, Any] | None:
    """The allocation's nodeSelector as Kubernetes JSON, for one claim taking every device of the slices."""
    given = AllocationInput(slices=tuple(slices), classes={"gpu": device_class()}, features=features)
    count = sum(len(s.spec.devices) for s in slices)
    results = allocate(NODE, [claim([exact("req", count)])], given, CelPrograms())
    assert results is not None
    selector: dict[str, Any] | None = msgspec.json.decode(msgspec.json.encode(results[0].node_selector))
    return selector


BOUND = device("d0", bindsToNode=True)
PLAIN = device("d0")


@pytest.mark.parametrize(
    ("slices", "features", "expected"),
    [
        pytest.param([slice_([BOUND], node=None, allNodes=True)], Features(), ON_NODE_1, id="allNodes-bound"),
        pytest.param([slice_([PLAIN], node=None, allNodes=True)], Features(), None, id="allNodes-plain"),
        pytest.param([slice_([BOUND], node=None, nodeSelector=ZONE)], Features(), ON_NODE_1, id="selector-bound"),
        pytest.param([slice_([PLAIN], node=None, nodeSelector=ZONE)], Features(), ZONE, id="selector-plain"),
        pytest.param(
            [
                slice_([PLAIN], pool="p0", node=None, nodeSelector=ZONE),
                slice_([BOUND], pool="p1", node=None, allNodes=True),
            ],
            Features(),
            ON_NODE_1,
            id="one-bound-device-of-two",
        ),
        pytest.param([slice_([BOUND])], Features(), ON_NODE_1, id="node-local-bound"),
        pytest.param(
            [slice_([BOUND], node=None, allNodes=True)],
            Features(DRADeviceBindingConditions=False),
            None,
            id="gate-off-allNodes",
        ),
        pytest.param(
            [slice_([BOUND], node=None, nodeSelector=ZONE)],
            Features(DRADeviceBindingConditions=False),
            ZONE,
            id="gate-off-selector",
        ),
        pytest.param(
            [slice_([device("d0", bindsToNode=False)], node=None, allNodes=True)], Features(), None, id="false"
        ),
    ],
)
def test_binds_to_node_sets_the_allocation_node_selector_to_the_node(
    slices: list[ResourceSlice], features: Features, expected: dict[str, Any] | None
) -> None:
    assert node_selector(slices, features) == expected
