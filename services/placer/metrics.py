"""The placer's Prometheus metrics (default registry, served on /metrics)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

DECISIONS = Counter(
    "topoplace_placer_decisions",
    "Decisions published, by outcome and by what caused them",
    ["outcome", "cause"],  # cause: pending, repeated, replan (binder rejected), retry (parked pod)
)
DECISION_SECONDS = Histogram(
    "topoplace_placer_decision_seconds",
    "Time to decide one pod (view snapshot + engine), excluding the publish",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
PUBLISH_SECONDS = Histogram(
    "topoplace_placer_publish_seconds",
    "Time for the broker to acknowledge one decision",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
VIEW_SIZE = Gauge(
    "topoplace_placer_view",
    "Size of the placer's view: nodes, schedulable nodes, hypernodes, pods holding devices by state",
    ["what"],
)
WAITING_PODS = Gauge(
    "topoplace_placer_waiting_pods",
    "Pods this placer may decide again: parked (unschedulable) or awaiting their binding",
    ["state"],
)
CAUGHT_UP = Gauge("topoplace_placer_caught_up", "1 once the view was rebuilt from the topics")
