"""The binder's leader-election timings (its Lease), and the rule that keeps two binders from binding at once.

Read from the environment by topoplace/config.py, which names these variables with the rest.
"""

from __future__ import annotations

import msgspec

LEADER_LEASE = "TOPOPLACE_LEADER_LEASE_SECONDS"
LEADER_RENEW_DEADLINE = "TOPOPLACE_LEADER_RENEW_DEADLINE_SECONDS"
LEADER_RETRY = "TOPOPLACE_LEADER_RETRY_SECONDS"
LEADER_WATCHDOG = "TOPOPLACE_LEADER_WATCHDOG_SECONDS"
LEADER_STOP_GRACE = "TOPOPLACE_LEADER_STOP_GRACE_SECONDS"


class LeaseTimingError(ValueError):
    """Lease timings that would let two binders bind at once; names the variables involved."""

    def __init__(self, variables: tuple[str, ...], reason: str) -> None:
        super().__init__(f"{', '.join(variables)}: {reason}")
        self.variables = variables
        self.reason = reason


class LeaseTimings(msgspec.Struct, frozen=True, kw_only=True):
    """The binder's leader election (kube-scheduler's 15 s / 10 s / 2 s by default).

    A leader whose last renewal *started* at t stops binding by t + renew deadline + watchdog
    period (its watchdog notices) + stop grace (its binds in flight are cancelled; a process whose
    binds have not ended by then exits). A standby takes the Lease no sooner than `lease_seconds`
    after it saw that renewal, which is after t. So that sum must be shorter than the lease:
    checked here, whoever builds the timings."""

    lease_seconds: int = 15  # whole seconds: the Lease stores an integer
    renew_deadline_seconds: int = 10
    retry_seconds: int = 2
    watchdog_seconds: float = 0.5  # how often a leader checks when its last renewal started
    stop_grace_seconds: float = 2.0  # cancelled binds must end within this, or the process exits

    def __post_init__(self) -> None:
        stops_by = self.renew_deadline_seconds + self.watchdog_seconds + self.stop_grace_seconds
        if not stops_by < self.lease_seconds:
            raise LeaseTimingError(
                (LEADER_LEASE, LEADER_RENEW_DEADLINE, LEADER_WATCHDOG, LEADER_STOP_GRACE),
                f"the lease ({self.lease_seconds} s) must be longer than renew deadline + watchdog + stop grace "
                f"({self.renew_deadline_seconds} + {self.watchdog_seconds} + {self.stop_grace_seconds} "
                f"= {stops_by} s), or a binder that lost the Lease may still bind when another takes it",
            )
        if not self.renew_deadline_seconds > 1.2 * self.retry_seconds:  # the election library's rule
            raise LeaseTimingError(
                (LEADER_RENEW_DEADLINE, LEADER_RETRY),
                f"the renew deadline ({self.renew_deadline_seconds} s) must be longer than 1.2 x the retry period "
                f"({self.retry_seconds} s)",
            )
