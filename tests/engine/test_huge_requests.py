"""A request larger than any node can hold is answered "unschedulable" with the reason, at once.

The counts are bounded by the node's capacity before any work, so a huge
number neither crashes the engine nor allocates memory in proportion to it.
"""

from __future__ import annotations

import pytest
from engine_builders import fixture_node, snapshot

from engine import Mode, PodRequest, Snapshot, place

HUGE = str(2**32)

CASES = [
    ("inf2.48xlarge", {"aws.amazon.com/neuroncore": HUGE}, "NeuronCore"),
    ("inf2.48xlarge", {"aws.amazon.com/neuron": HUGE}, "Neuron device"),
    ("trn1.32xlarge", {"aws.amazon.com/neuroncore": HUGE}, "NeuronCore"),
    ("trn1.32xlarge", {"aws.amazon.com/neuron": HUGE}, "Neuron device"),
    ("metax-8gpu-2zone", {"metax-tech.com/gpu": HUGE}, "MetaX card"),
    ("metax-8gpu-2zone", {"metax-tech.com/sgpu": HUGE}, "MetaX card"),
    ("dgx-h100", {"nvidia.com/gpu": HUGE}, "GPU"),
    ("dgx-h100", {"nvidia.com/gpu": HUGE, "nvidia.com/gpumem": "1000"}, "GPU"),
]


def cluster(fixture: str) -> Snapshot:
    return snapshot(fixture_node("a", fixture), fixture_node("b", fixture))


@pytest.mark.parametrize("mode", [Mode.DEFAULT, Mode.HAMI])
@pytest.mark.parametrize(("fixture", "requests", "noun"), CASES)
def test_a_request_beyond_any_node_is_unschedulable_with_the_reason(
    fixture: str, requests: dict[str, str], noun: str, mode: Mode
) -> None:
    decision = place(cluster(fixture), PodRequest(uid="huge", requests=requests), mode, explain=True)
    assert decision.node is None
    assert decision.reason
    reasons = [v.reason for v in decision.alternatives]
    assert len(reasons) == 2
    assert all(HUGE in r and noun in r for r in reasons), reasons
