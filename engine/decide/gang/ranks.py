"""A member's rank: the pod index its workload controller writes, so neighbouring ranks share the tightest domain.

Read in this order (the first whole number found, as a label or an annotation):
- the label Kueue's `kueue.x-k8s.io/pod-group-pod-index-label` annotation names (a pod group's own index label);
- `kueue.x-k8s.io/pod-group-pod-index` (Kueue's pod groups);
- `batch.kubernetes.io/job-completion-index` (an Indexed Job);
- `apps.kubernetes.io/pod-index` (a StatefulSet);
- `leaderworkerset.sigs.k8s.io/worker-index` (a LeaderWorkerSet group: the leader is 0).

Members without an index follow the indexed ones in natural name order (`w-2` before `w-10`).
"""

from __future__ import annotations

import re

from engine.core.model import PodRequest

KUEUE_INDEX_LABEL_ANNOTATION = "kueue.x-k8s.io/pod-group-pod-index-label"
KUEUE_POD_INDEX = "kueue.x-k8s.io/pod-group-pod-index"
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
STATEFULSET_POD_INDEX = "apps.kubernetes.io/pod-index"
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
RANK_KEYS = (KUEUE_POD_INDEX, JOB_COMPLETION_INDEX, STATEFULSET_POD_INDEX, LWS_WORKER_INDEX)
RANK_ANNOTATIONS = frozenset((*RANK_KEYS, KUEUE_INDEX_LABEL_ANNOTATION))

_DIGITS = re.compile(r"(\d+)")


def rank_of(pod: PodRequest) -> int | None:
    """The pod's index within its workload, or None when it carries none."""
    named = pod.annotations.get(KUEUE_INDEX_LABEL_ANNOTATION, "")
    for key in (named, *RANK_KEYS) if named else RANK_KEYS:
        text = pod.labels.get(key, pod.annotations.get(key, ""))
        if text.isascii() and text.isdigit():
            return int(text)
    return None


def natural_key(text: str) -> tuple[tuple[str, int], ...]:
    """`text` split into (letters, number) pairs, so numbers compare by value: w-2 < w-10."""
    parts = _DIGITS.split(text)
    return tuple((parts[i], int(parts[i + 1]) if i + 1 < len(parts) else -1) for i in range(0, len(parts), 2))


def member_key(pod: PodRequest) -> tuple[bool, int, tuple[tuple[str, int], ...], str, str]:
    """Members in rank order: by index, then those without one by natural name (then name, uid: a total order)."""
    rank = rank_of(pod)
    return (rank is None, rank if rank is not None else 0, natural_key(pod.name), pod.name, pod.uid)
