"""VolumeMounts' indexes answer as a scan of every pod would, whatever the order of binds, placements and
departures (the placer asks them per node rebuild, so they must never need the scan)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.placer.volume_mounts import Mounted, VolumeMounts

NODES = ("a", "b", "c")
CLAIMS = ("ns/c0", "ns/c1", "ns/c2", "ns/c3")
UIDS = ("p0", "p1", "p2", "p3")

mounted = st.none() | st.builds(
    Mounted, st.sampled_from(NODES), st.lists(st.sampled_from(CLAIMS), max_size=3).map(tuple)
)
steps = st.lists(st.tuples(st.booleans(), st.sampled_from(UIDS), mounted), max_size=30)


@given(steps, st.frozensets(st.sampled_from(UIDS)))
def test_the_indexes_answer_as_a_scan_would(ops: list[tuple[bool, str, Mounted | None]], kept: frozenset[str]) -> None:
    mounts = VolumeMounts()
    for bound, uid, mount in ops:
        (mounts.set_bound if bound else mounts.set_placed)(uid, mount)
    mounts.forget_placed(lambda uid: uid in kept)

    every = [*mounts.bound.values(), *mounts.placed.values()]
    assert all(uid in kept for uid in mounts.placed)
    for node in NODES:
        assert sorted(mounts.on_node(node)) == sorted(k for m in every if m.node == node for k in m.claims)
    for claim in CLAIMS:
        assert mounts.nodes_mounting([claim]) == {m.node for m in every if claim in m.claims}
    assert mounts.nodes() == {m.node for m in every}
