"""The binder's Prometheus metrics (default registry, served on /metrics)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from topoplace.informer import InformerMetrics

BINDS = Counter(
    "topoplace_binder_binds_total",
    "Placements handled, by binding outcome (bound, conflict, failed, unschedulable).",
    ["outcome"],
)
BIND_SECONDS = Histogram(
    "topoplace_binder_bind_seconds",
    "Time from receiving a placement to reporting its outcome.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
RETRIES = Counter(
    "topoplace_binder_retries_total",
    "API calls retried after a transient error (429, 5xx, timeout, connection), by operation.",
    ["operation"],
)
LEDGER_CONFLICTS = Counter(
    "topoplace_binder_ledger_conflicts_total",
    "Placements refused before any API call because their devices are held by other pods.",
)
EVENTS_FAILED = Counter(
    "topoplace_binder_events_failed_total",
    "Kubernetes Events that could not be created (best effort: the binding is not affected).",
)
EVENTS_DROPPED = Counter(
    "topoplace_binder_events_dropped_total",
    "Kubernetes Events given up: retries exhausted, or too many retries in flight.",
)
PREEMPTIONS = Counter(
    "topoplace_binder_preemptions_total",
    "Preemptions carried out: a pod nominated to a node and lower-priority pods evicted for it.",
)
PREEMPTION_VICTIMS = Counter(
    "topoplace_binder_preemption_victims_total",
    "Pods evicted (DisruptionTarget, then deleted with their uid as precondition) for a preemptor.",
)
WASTED_PREEMPTIONS = Counter(
    "topoplace_binder_wasted_preemptions_total",
    "Victims evicted for a preemptor that was not then bound (its room's hold expired, or it went).",
)
RESERVATIONS = Gauge(
    "topoplace_binder_reservations",
    "Nominated pods whose room (their own device shares) the binder holds from other pods.",
)
LEDGER_PODS = Gauge(
    "topoplace_binder_ledger_pods",
    "Pods the device ledger knows to hold devices.",
)
WATCH_RESTARTS = Counter(
    "topoplace_binder_watch_restarts_total",
    "Failed list or watch calls of the Pod, Node or ResourceClaim informers, tried again after a backoff.",
    ["resource"],
)
WATCH_BAD_OBJECTS = Counter(
    "topoplace_binder_watch_bad_objects_total",
    "Pod, Node or ResourceClaim objects from the API server that did not decode (skipped).",
    ["resource"],
)
WATCH_RELISTS = Counter(
    "topoplace_binder_watch_relists_total",
    "Lists of a resource after the first: its watch's version expired, or the periodic resync came.",
    ["resource", "reason"],
)
INFORMER_METRICS = InformerMetrics(relists=WATCH_RELISTS, bad_objects=WATCH_BAD_OBJECTS, errors=WATCH_RESTARTS)
LEDGER_DELETES_REFUSED = Counter(
    "topoplace_binder_ledger_deletes_refused_total",
    "pods.lifecycle 'deleted' events ignored because the API server still has the pod.",
)
LEDGER_EDITS_IGNORED = Counter(
    "topoplace_binder_ledger_edits_ignored_total",
    "Reports of other devices for a bound pod (an edited annotation): the devices bound stay held.",
)
CONDITIONS_FAILED = Counter(
    "topoplace_binder_conditions_failed_total",
    "PodScheduled=False conditions that could not be written (best effort, after retries).",
)
CLAIM_COLLISIONS = Counter(
    "topoplace_binder_claim_collisions_total",
    "DRA allocations refused because another ResourceClaim's allocation (or one of ours in flight) names a device.",
)
REFUSALS = Counter(
    "topoplace_binder_refusals_total",
    "Placements refused before any write, by the rule that refused them (other_scheduler, taint, "
    "node_affinity, node_unschedulable, node_not_ready, device_identity, ledger, resources, ...).",
    ["kind"],
)

UNSEALED_PODS = Counter(
    "topoplace_binder_unsealed_pods_total",
    "Bound pods seen with a device annotation but no valid seal (their devices do not count).",
)

LEDGER_BOUND_UNCONFIRMED = Counter(
    "topoplace_binder_ledger_bound_unconfirmed_total",
    "pods.lifecycle 'bound' reports ignored: the API watch does not have that pod bound on that node.",
)
REPORTS_SKIPPED = Counter(
    "topoplace_binder_reports_skipped_total",
    "Events and PodScheduled conditions not written because the pod is not the placement's to report on, "
    "by why (not_seen, other_pod, other_scheduler, bound, terminating, pod_replaced).",
    ["why"],
)
