"""kube-scheduler's FitError message: a histogram of reasons sorted as strings."""

from __future__ import annotations

from engine.decide.kube.messages import NO_NODES_AVAILABLE, fit_error_message

TAINT = "node(s) had untolerated taint {gpu: reserved}"


def test_histogram_is_sorted_as_strings_not_by_count() -> None:
    reasons = [TAINT] * 3 + ["Insufficient nvidia.com/gpu"] * 17
    assert fit_error_message(20, reasons) == (
        "0/20 nodes are available: 17 Insufficient nvidia.com/gpu, 3 node(s) had untolerated taint {gpu: reserved}."
    )


def test_a_node_with_several_reasons_counts_in_each() -> None:
    reasons = ["Insufficient cpu", "Insufficient memory", "Insufficient cpu", "node(s) were unschedulable"]
    assert fit_error_message(3, reasons) == (
        "0/3 nodes are available: 1 Insufficient memory, 1 node(s) were unschedulable, 2 Insufficient cpu."
    )


def test_counts_with_more_digits_sort_by_their_first_digit() -> None:
    reasons = ["b"] * 9 + ["a"] * 10
    assert fit_error_message(19, reasons) == "0/19 nodes are available: 10 a, 9 b."


def test_a_prefilter_message_replaces_the_histogram() -> None:
    message = fit_error_message(5, ["ignored"], pre_filter_message="pod affinity terms conflict")
    assert message == "0/5 nodes are available: pod affinity terms conflict."


def test_a_postfilter_message_is_appended() -> None:
    message = fit_error_message(
        2, ["Insufficient cpu"] * 2, post_filter_message="preemption: 0/2 nodes are available: 2 No victims."
    )
    assert message == (
        "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No victims."
    )


def test_no_reasons_and_no_nodes() -> None:
    assert fit_error_message(4, []) == "0/4 nodes are available:"
    assert fit_error_message(0, []) == NO_NODES_AVAILABLE == "no nodes available to schedule pods"
