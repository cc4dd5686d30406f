"""The message kube-scheduler gives a pod no node can take ("0/20 nodes are available: ...").

Built as FitError.Error() builds it (kubernetes pkg/scheduler/framework/types.go):
each node contributes each of its reasons once; the histogram entries read
"<count> <reason>" and are sorted as strings (Go's sort.Strings, byte order), not
by count, so "17 Insufficient nvidia.com/gpu" comes before "3 node(s) had ...".
When a PreFilter rejected the pod, its message replaces the histogram. A
PostFilter message (preemption) is appended after a space. With no nodes at
all, kube reports ErrNoNodesAvailable instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

NO_NODES_AVAILABLE = "no nodes available to schedule pods"


def fit_error_message(
    total_nodes: int,
    reasons: Iterable[str],
    *,
    pre_filter_message: str | None = None,
    post_filter_message: str | None = None,
) -> str:
    """`reasons` holds every node's reasons (a reason given by n nodes appears n times)."""
    if total_nodes == 0:
        return NO_NODES_AVAILABLE
    message = f"0/{total_nodes} nodes are available:"
    if pre_filter_message:
        message += f" {pre_filter_message}."
    else:
        histogram = sorted(f"{count} {reason}" for reason, count in Counter(reasons).items())
        if histogram:
            message += f" {', '.join(histogram)}."
    if post_filter_message:
        message += f" {post_filter_message}"
    return message
