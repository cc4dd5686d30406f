"""hami mode equals HAMi v2.7's NVIDIA Fit, as a naive reference restates it, on random nodes.

The reference below is our own restatement of HAMi's published algorithm, step by step
(sort by usage score, walk from the end, generate every combination in order, keep the
first strictly better one),
enumerating all C(n, k) sets as HAMi does; the engine must give the same GPUs in the
same order without enumerating.
"""

from __future__ import annotations

import itertools

from engine_builders import gpu, matrix_links, node, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Allocation, Mode, NodeState, PodRequest, place
from engine.node.vendors.nvidia.links import pair_table
from schemas.topology import PcieLevel

LEVELS = [None, PcieLevel.SYS, PcieLevel.NODE, PcieLevel.PHB, PcieLevel.PIX]


def hami_reference(state: NodeState, count: int, topology: bool, binpack: bool) -> list[int] | None:
    devices = sorted(state.devices, key=lambda d: d.index)
    used = {d.index: 0 for d in devices}
    for a in state.allocations:
        used[a.index] += 1
    memory_used = {d.index: sum(d.memory_mib for a in state.allocations if a.index == d.index) for d in devices}
    cores_used = {d.index: 100 * used[d.index] for d in devices}

    def usage(d):  # gpu_policy.go ComputeScore for a whole-GPU request (mem 100 %, cores 0)
        return 10 * ((count + used[d.index]) / 10 + (0 + cores_used[d.index]) / 100
                     + (d.memory_mib + memory_used[d.index]) / d.memory_mib)  # fmt: skip

    numa = {d.index: d.numa_node or 0 for d in devices}
    if binpack:
        ordered = sorted(devices, key=lambda d: (-numa[d.index], usage(d)))
    else:
        ordered = sorted(devices, key=lambda d: (numa[d.index], -usage(d)))
    picked = []
    for d in reversed(ordered):
        if used[d.index] > 0:  # a whole-GPU request needs an idle GPU
            continue
        picked.append(d.index)
        if not topology and len(picked) == count:
            return picked
    if len(picked) < count:
        return None
    if len(picked) == count:
        return picked
    links = {(link.src, link.dst): link for link in state.links}
    table = pair_table(devices, links)
    if count == 1:
        worst, worst_total = None, 0
        for a in picked:
            total = sum(table.score(a, b) for b in picked if b != a)
            if worst is None or total < worst_total:
                worst, worst_total = a, total
        return [worst]
    best, best_score = None, -1
    for combo in itertools.combinations(picked, count):
        score = sum(table.score(a, b) for a, b in itertools.combinations(combo, 2))
        if best is None or score > best_score:
            best, best_score = list(combo), score
    return best


@st.composite
def nodes(draw: st.DrawFn) -> NodeState:
    n = draw(st.integers(min_value=1, max_value=9))
    numa = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    pairs = {}
    for a in range(n):
        for b in range(a + 1, n):
            pairs[(a, b)] = (draw(st.sampled_from([0, 0, 1, 2, 4])), draw(st.sampled_from(LEVELS)))
    busy = draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n))
    return node(
        "n1",
        [gpu(i, numa=numa[i]) for i in range(n)],
        matrix_links({p: v for p, v in pairs.items() if v != (0, None)}),
        allocations=[Allocation(pod_uid=f"b{i}", index=i) for i in busy],
    )


@settings(max_examples=80, deadline=None)
@given(nodes(), st.integers(1, 5), st.booleans(), st.booleans())
def test_hami_mode_matches_hamis_fit(state: NodeState, count: int, topology: bool, binpack: bool) -> None:
    policies = ["binpack" if binpack else "spread"] + (["topology-aware"] if topology else [])
    request = PodRequest(
        uid="p", requests={"nvidia.com/gpu": str(count)},
        annotations={"hami.io/gpu-scheduler-policy": ",".join(policies)},
    )  # fmt: skip
    expected = hami_reference(state, count, topology, binpack)
    decision = place(snapshot(state), request, Mode.HAMI)
    if expected is None:
        assert decision.node is None
    else:
        assert [d.index for d in decision.devices] == expected
