"""Resource requests against a node's allocatable, as kube-scheduler's NodeResourcesFit does.

Every amount is an integer in thousandths ("milli-units") so one type serves all
resources, with kube's own rounding (framework.Resource.Add): cpu is
Quantity.MilliValue(), every other resource is Quantity.Value() (whole units,
rounded up) times 1000. So "1.5" bytes of memory is 2000 here, as kube reads it
as 2 bytes.

Which requests are checked (noderesources/fit.go, fitsRequest):
- pods: the node's allocatable `pods` is the most pods it takes; one more than
  that is "Too many pods" (a node that reports no `pods` takes none). The pods
  on the node are the larger of its pod count and its `requested.pods`: a
  snapshot may say either (kube counts len(nodeInfo.Pods)), and a node full by
  one of them is full.
- cpu, memory, ephemeral-storage: checked when requested (> 0).
- scalar resources, checked when requested (> 0): extended resources (a name
  with a "/" outside kubernetes.io, e.g. nvidia.com/gpu), hugepages-*,
  kubernetes.io/-prefixed names and attachable-volumes-*. Other names (a bare
  "foo") are not checked at all, as kube ignores them.
- An extended resource the node does not report counts as 0 allocatable, so
  asking for it fails ("Insufficient example.com/foo"), except names in
  `ignored`: device-plugin resources that the scheduler does not count because
  a device scheduler checks them (HAMi's scheduler-extender configuration marks
  nvidia.com/gpumem, nvidia.com/gpucores and the like `ignoredByScheduler`;
  our device vendors check them per device). As in kube, `ignored` applies to
  extended resources only.
Kube iterates scalar resources in map order; here they are checked in name order.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from engine.core.errors import RequestError

# A pod's effective request lives in the event contract, shared with the cluster watcher.
from schemas.pod_requests import InitContainerRequest as InitContainerRequest
from schemas.pod_requests import effective_pod_request as effective_pod_request
from schemas.quantity import QuantityError, resource_milli

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
TOO_MANY_PODS = "Too many pods"
_NATIVE_CHECKED = (CPU, MEMORY, EPHEMERAL_STORAGE)
_UNIT = 1000  # milli-units per unit


def is_extended_resource(name: str) -> bool:
    """A resource outside kubernetes.io with a domain prefix (v1helper.IsExtendedResourceName)."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def is_scalar_resource(name: str) -> bool:
    """The names NodeResourcesFit checks besides cpu, memory and ephemeral-storage (IsScalarResourceName)."""
    return (
        is_extended_resource(name)
        or name.startswith("hugepages-")
        or "kubernetes.io/" in name
        or name.startswith("attachable-volumes-")
    )


def parse_requests(mapping: Mapping[str, str], field: str) -> dict[str, int]:
    """Quantities by resource name -> milli-units; RequestError names `<field>.<resource>`."""
    parsed: dict[str, int] = {}
    for name, text in mapping.items():
        try:
            amount = resource_milli(name, text)
        except QuantityError as exc:
            raise RequestError(f"{field}.{name}", str(exc)) from None
        if amount < 0:
            raise RequestError(f"{field}.{name}", f"must not be negative, got {text!r}")
        parsed[name] = amount
    return parsed


def pods_on_node(requested: Mapping[str, int], pod_count: int) -> int:
    """The pods a node holds: its pod count, or its `requested.pods` (milli-units) where that says more."""
    return max(pod_count, -(-requested.get(PODS, 0) // _UNIT))


class ResourceFit:
    """One pod's request, prepared once and checked against many nodes."""

    __slots__ = ("checks",)

    def __init__(self, request: Mapping[str, int], ignored: Collection[str] = ()) -> None:
        checks = [(name, request[name], f"Insufficient {name}") for name in _NATIVE_CHECKED if request.get(name, 0)]
        for name in sorted(request):
            amount = request[name]
            if amount <= 0 or name in _NATIVE_CHECKED or not is_scalar_resource(name):
                continue
            if is_extended_resource(name) and name in ignored:
                continue
            checks.append((name, amount, f"Insufficient {name}"))
        self.checks = tuple(checks)

    def failures(self, allocatable: Mapping[str, int], requested: Mapping[str, int], pod_count: int) -> list[str]:
        """kube-scheduler's reasons, in its order; empty when the pod fits."""
        reasons: list[str] = []
        if pods_on_node(requested, pod_count) * _UNIT + _UNIT > allocatable.get(PODS, 0):
            reasons.append(TOO_MANY_PODS)
        for name, amount, reason in self.checks:
            if amount > allocatable.get(name, 0) - requested.get(name, 0):
                reasons.append(reason)
        return reasons


def fit_failures(
    request: Mapping[str, int],
    allocatable: Mapping[str, int],
    requested: Mapping[str, int],
    pod_count: int,
    ignored: Collection[str] = (),
) -> list[str]:
    """Why the pod's request does not fit the node (milli-units; `requested` = what its pods already ask)."""
    return ResourceFit(request, ignored).failures(allocatable, requested, pod_count)
