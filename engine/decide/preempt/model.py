"""What preemption reads (the pods running on the nodes, the disruption budgets, the preemptor) and answers."""

from __future__ import annotations

import msgspec

from engine.core.model import Decision, PodRequest
from schemas.events.network import LabelSelector
from schemas.kube import HostPort

# kube's PodPriority of a pod without spec.priority (no PriorityClass, no globalDefault).
DEFAULT_PRIORITY = 0
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
PREEMPT_NEVER = "Never"


class RunningPod(msgspec.Struct, frozen=True, kw_only=True):
    """A pod bound to a node, as preemption weighs it: what it holds there and how important it is.

    `holder` is the pod's id in the node's allocations (`Allocation.pod_uid`): evicting the pod
    frees exactly the device shares held under it."""

    namespace: str = "default"
    name: str
    node: str
    holder: str = ""
    priority: int = DEFAULT_PRIORITY
    # status.startTime in seconds since the epoch; None: not started (kube then reads it as now, the latest).
    start_time: float | None = None
    labels: dict[str, str] = {}
    requests: dict[str, str] = {}  # its effective requests, as summed into its node's `requested`
    host_ports: tuple[HostPort, ...] = ()
    # deletionTimestamp set with the DisruptionTarget condition of reason PreemptionByScheduler.
    terminating_by_preemption: bool = False
    # Its pod group (namespace/name; "": none) and the group's minMember: a gang member is evicted
    # only while its gang keeps minMember running, or with its whole gang.
    gang: str = ""
    gang_min_member: int = 0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class DisruptionBudget(msgspec.Struct, frozen=True, kw_only=True):
    """A PodDisruptionBudget as kube-scheduler reads it: its namespace, selector and status.disruptionsAllowed.

    A budget without a selector, or with an empty one, selects no pod (policy/v1)."""

    namespace: str = "default"
    name: str
    selector: LabelSelector | None = None
    disruptions_allowed: int = 0
    disrupted_pods: tuple[str, ...] = ()  # status.disruptedPods: names the API server already counted


class Preemptor(msgspec.Struct, frozen=True, kw_only=True):
    """The pending pod that may make room: its request, spec.priority, preemptionPolicy, nomination."""

    request: PodRequest
    priority: int = DEFAULT_PRIORITY
    policy: str = PREEMPT_LOWER_PRIORITY  # spec.preemptionPolicy
    nominated_node: str = ""  # status.nominatedNodeName from an earlier preemption


class Victim(msgspec.Struct, frozen=True, kw_only=True):
    """A pod to evict so that the preemptor fits, and why this one."""

    pod: str  # namespace/name
    priority: int
    violates_budget: bool = False
    why: str = ""


class Candidate(msgspec.Struct, frozen=True, kw_only=True):
    """A node where evicting `victims` lets the preemptor run, with what upstream compares nodes by."""

    node: str
    victims: tuple[RunningPod, ...]  # most important first (MoreImportantPod)
    budget_violations: int = 0
    set_score: float = 0.0  # the preemptor's link score there once the victims are gone
    remainder_loss: float = 0.0  # the idle link score its devices break (fewer broken sets: smaller)


class CountOnly(msgspec.Struct, frozen=True, kw_only=True):
    """What kube's reprieve, counting devices only, would evict on the chosen node instead, and the link
    score the pod would get there (set when it differs from the device-aware choice)."""

    victims: tuple[str, ...]  # namespace/name, most important first
    set_score: float
    set_score_chosen: float


class Preemption(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of a preemption attempt.

    `node` None: no preemption; `reason` says why, in kube-scheduler's words ("preemption: ...").
    Otherwise the preemptor is nominated to `node` once `victims` are gone; `decision` is its place
    there (devices, score) computed as if they were gone already."""

    node: str | None
    victims: tuple[Victim, ...] = ()
    budget_violations: int = 0
    decision: Decision | None = None
    reason: str = ""
    candidates: tuple[Candidate, ...] = ()  # every node where preemption works, best first
    count_only: CountOnly | None = None  # a device pod: kube's choice on that node, when it differs
