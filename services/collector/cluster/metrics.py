"""The cluster watcher's counters of its informers (topoplace.informer), by resource."""

from __future__ import annotations

from prometheus_client import Counter

from topoplace.informer import InformerMetrics

RELISTS = Counter(
    "topoplace_cluster_watcher_relists_total", "Lists of a resource after the first", ["resource", "reason"]
)
BAD_OBJECTS = Counter("topoplace_cluster_watcher_bad_objects_total", "API objects that did not decode", ["resource"])
WATCH_ERRORS = Counter("topoplace_cluster_watcher_watch_errors_total", "Failed list or watch calls", ["resource"])
INFORMER_METRICS = InformerMetrics(relists=RELISTS, bad_objects=BAD_OBJECTS, errors=WATCH_ERRORS)
