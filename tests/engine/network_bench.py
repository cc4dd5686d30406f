"""A cluster-sized network tree, and the time to build it and to aggregate over it.

Run `python -m tests.engine.network_bench` for the figures (the tests only check the answers).
"""

from __future__ import annotations

import time

from engine.cluster.network import HyperNode, NetworkTree, aggregate, build_tree
from engine.core.hypernodes import HyperNodeSpec, Member, MemberType, ObjectMeta, exact_member

# 10,000 hypernodes: 7,500 ToRs, 2,000 leaves, 450 spines, 50 cores; 10,000 nodes spread over the ToRs.
TIER_SIZES = ((1, 7_500), (2, 2_000), (3, 450), (4, 50))


def large_cluster(n_nodes: int = 10_000) -> tuple[list[HyperNode], dict[str, dict[str, str]]]:
    nodes = {f"node-{i:05d}": {"kubernetes.io/hostname": f"node-{i:05d}"} for i in range(n_nodes)}
    members: dict[str, list[Member]] = {}
    below = list(nodes)
    kind: MemberType = "Node"
    for tier, size in TIER_SIZES:
        names = [f"t{tier}-{i:05d}" for i in range(size)]
        for i, child in enumerate(below):
            members.setdefault(names[i % size], []).append(exact_member(kind, child))
        below, kind = names, "HyperNode"
    hypernodes = [
        HyperNode(metadata=ObjectMeta(name=name), spec=HyperNodeSpec(tier=int(name[1]), members=tuple(ms)))
        for name, ms in members.items()
    ]
    return hypernodes, nodes


def timed_build_and_aggregate(repeats: int = 20) -> tuple[NetworkTree, float, float]:
    """The tree, the seconds to build it, and the best seconds of one aggregate over it."""
    hypernodes, nodes = large_cluster()
    started = time.perf_counter()
    tree = build_tree(hypernodes, nodes).tree
    build_s = time.perf_counter() - started
    free = [i % 9 for i in range(len(tree.nodes))]
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        aggregate(tree, free)
        best = min(best, time.perf_counter() - started)
    return tree, build_s, best


def main() -> None:
    tree, build_s, aggregate_s = timed_build_and_aggregate()
    print(f"{len(tree.nodes)} nodes, {len(tree.hypernodes)} hypernodes: build {build_s * 1e3:.0f} ms")
    print(f"aggregate (sequence in tree order): {aggregate_s * 1e3:.2f} ms")
    by_name = {n: i % 9 for i, n in enumerate(tree.nodes)}
    best = float("inf")
    for _ in range(20):
        started = time.perf_counter()
        aggregate(tree, by_name)
        best = min(best, time.perf_counter() - started)
    print(f"aggregate (mapping by node name): {best * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
