"""A pod's effective request per resource, as k8s.io/component-helpers resource.PodRequests computes it.

One definition for the whole project: the cluster watcher computes the
`requests` it publishes with it (exact quantities), the engine checks a pod's
fit with it (milli-units). `effective_request` works on any amounts that add
and compare: ints, or Decimals from `schemas.quantity.parse_quantity`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import TypeVar

import msgspec

__all__ = ["InitContainerRequest", "effective_pod_request", "effective_request", "format_quantity"]

Amount = TypeVar("Amount", int, Decimal)


def effective_request(
    containers: Iterable[Mapping[str, Amount]],
    init_containers: Iterable[tuple[Mapping[str, Amount], bool]] = (),
    overhead: Mapping[str, Amount] | None = None,
) -> dict[str, Amount]:
    """The pod's request per resource; each init container is (its requests, restartable).

    Containers run together: their requests add up. Init containers run one at a
    time before them, but sidecars (restartable init containers, restartPolicy
    Always) keep running: each sidecar adds to the sum, and an ordinary init
    container needs its own request plus every sidecar started before it. The
    pod needs the larger of the sum and every init container's need, plus the
    pod's overhead. Requests are taken as given (the API server has already
    copied a limit into a missing request).
    """
    total: dict[str, Amount] = {}
    for requests in containers:
        _add(total, requests)
    sidecars: dict[str, Amount] = {}
    init_need: dict[str, Amount] = {}
    for requests, restartable in init_containers:
        if restartable:
            _add(total, requests)
            _add(sidecars, requests)
            need = dict(sidecars)
        else:
            need = dict(requests)
            _add(need, sidecars)
        for name, amount in need.items():
            init_need[name] = max(init_need[name], amount) if name in init_need else amount
    for name, amount in init_need.items():
        total[name] = max(total[name], amount) if name in total else amount
    if overhead:
        _add(total, overhead)
    return total


def _add(into: dict[str, Amount], amounts: Mapping[str, Amount]) -> None:
    for name, amount in amounts.items():
        into[name] = into[name] + amount if name in into else amount


class InitContainerRequest(msgspec.Struct, frozen=True, kw_only=True):
    requests: Mapping[str, int]  # milli-units
    restartable: bool = False  # restartPolicy: Always, i.e. a sidecar that keeps running


def effective_pod_request(
    containers: Iterable[Mapping[str, int]],
    init_containers: Iterable[InitContainerRequest] = (),
    overhead: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """`effective_request` in milli-units, the engine's unit.

    Kube adds exact quantities and rounds once; adding milli-units rounds each
    container, which differs only below a thousandth of a cpu or a byte.
    """
    return effective_request(containers, [(i.requests, i.restartable) for i in init_containers], overhead)


def format_quantity(value: Decimal) -> str:
    """An exact amount as a quantity the API server reads back to the same value: "2", "750m", "0.0005"."""
    if value == value.to_integral_value():
        return str(int(value))
    milli = value * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return format(value.normalize(), "f")
