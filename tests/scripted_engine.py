"""A real engine whose pod decisions a test scripts: the placer's one code path, a decision the test chooses."""

from __future__ import annotations

from collections.abc import Callable

from engine import ClusterIndex, Decision, Engine, Mode, PodRequest, Snapshot, WorkloadClass

PlaceFn = Callable[[Snapshot, PodRequest, Mode], Decision]


class ScriptedEngine(Engine):
    """Pods are decided by `place` over the index's nodes (and the workload); gangs by the real engine."""

    def __init__(self, place: PlaceFn) -> None:
        super().__init__()
        self.scripted = place

    def place_in(
        self,
        index: ClusterIndex,
        request: PodRequest,
        mode: Mode = Mode.DEFAULT,
        *,
        workload: tuple[WorkloadClass, ...] = (),
        explain: bool = False,
        runners_up: int = 0,
    ) -> Decision:
        return self.scripted(Snapshot(nodes=tuple(index.nodes()), workload=workload), request, mode)
