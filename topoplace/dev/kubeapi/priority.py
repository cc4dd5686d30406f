"""The Priority admission plugin, as the real API server runs it on a pod's create.

`spec.priorityClassName` is resolved to `spec.priority` and `spec.preemptionPolicy` from the
PriorityClass of that name; a pod naming none gets the globalDefault class (the highest, if
several say so; its name is written into the pod), else priority 0 and PreemptLowerPriority.
A class that does not exist, or a priority or policy in the spec that differs from the class's,
is refused with 403 Forbidden and the plugin's own words (plugin/pkg/admission/priority).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from topoplace.dev.kubeapi.errors import ApiError

PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"


def _forbidden(name: str, detail: str) -> ApiError:
    """admission.NewForbidden: `pods "<name>" is forbidden: <detail>`."""
    return ApiError(403, "Forbidden", f'pods "{name}" is forbidden: {detail}', name=name, kind="pods")


def _global_default(classes: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    defaults = [c for c in classes if c.get("globalDefault")]
    return max(defaults, key=lambda c: (int(c.get("value") or 0), c["metadata"]["name"])) if defaults else None


def admit_priority(pod: dict[str, Any], classes: list[dict[str, Any]]) -> None:
    """Writes the pod's spec.priority and spec.preemptionPolicy (and the default class's name). ApiError."""
    spec = pod.setdefault("spec", {})
    name = pod.get("metadata", {}).get("name", "")
    class_name = spec.get("priorityClassName") or ""
    if class_name:
        found = next((c for c in classes if c["metadata"]["name"] == class_name), None)
        if found is None:
            raise _forbidden(name, f"no PriorityClass with name {class_name} was found")
    else:
        found = _global_default(classes)
        if found is not None:
            spec["priorityClassName"] = found["metadata"]["name"]
    priority = int(found.get("value") or 0) if found is not None else 0
    policy = (found.get("preemptionPolicy") if found is not None else None) or PREEMPT_LOWER_PRIORITY
    given = spec.get("priority")
    if given is not None and given != priority:
        raise _forbidden(
            name,
            f"the integer value of priority ({given}) must not be provided in pod spec; "
            f"priority admission controller computed {priority} from the given PriorityClass name",
        )
    given_policy = spec.get("preemptionPolicy")
    if given_policy is not None and given_policy != policy:
        raise _forbidden(
            name,
            f"the string value of PreemptionPolicy ({given_policy}) must not be provided in pod spec; "
            f"priority admission controller computed {policy} from the given PriorityClass name",
        )
    spec["priority"] = priority
    spec["preemptionPolicy"] = policy
