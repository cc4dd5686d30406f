"""The chaos run's priority mix: a stream of high-priority pods among low-priority ones, and what
preemption must never do, read from the cluster at the end (pure, but for the classes' creation).

Invariants, from the `Preempted` Events topoplace writes on its victims ("Preempted by pod <uid> on
node <node>") and the priorities the run gave each pod it submitted:

- `preempted_not_lower`: a victim whose priority is not below its preemptor's;
- `wasted_preemption`: a victim evicted for a preemptor still in the cluster and not bound once the
  run has converged (a preemptor the workload deleted is not counted: the user took it back).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import aiohttp

from topoplace.dev.chaos.api_calls import create as _create

Obj = dict[str, Any]
PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
LOW, HIGH = "chaos-low", "chaos-high"
VALUES = {LOW: 0, HIGH: 1000}  # low: as a pod without a class, so only the high stream preempts
HIGH_EVERY = 25  # one pod in this many is of high priority
JUDGED_AT_THE_END = frozenset({"wasted_preemption"})  # not from the checks before convergence
_PREEMPTED = re.compile(r"^Preempted by pod (?P<uid>\S+) on node (?P<node>\S+)$")


async def seed_classes(session: aiohttp.ClientSession) -> None:
    for name, value in VALUES.items():
        await _create(session, PRIORITY_CLASSES, {"metadata": {"name": name}, "value": value})


def mix(pods: list[Obj], every: int = HIGH_EVERY) -> dict[str, int]:
    """Give each pod its class (every `every`-th one high); the priority of each pod by name."""
    priorities: dict[str, int] = {}
    for i, pod in enumerate(pods):
        name = HIGH if i % every == every - 1 else LOW
        pod["spec"]["priorityClassName"] = name
        priorities[pod["metadata"]["name"]] = VALUES[name]
    return priorities


def preemption_violations(
    pods: tuple[Obj, ...], events: tuple[Obj, ...], submitted: Mapping[str, int]
) -> list[tuple[str, str, str]]:
    """(kind, subject, detail) of every preemption that broke an invariant; `submitted`: priority by pod name."""
    by_uid = {p["metadata"].get("uid", ""): p for p in pods}
    out: list[tuple[str, str, str]] = []
    for event in events:
        if event.get("reason") != "Preempted":
            continue
        found = _PREEMPTED.match(event.get("message") or "")
        involved = event.get("involvedObject") or {}
        if found is None:
            continue
        victim = f"{involved.get('namespace', '')}/{involved.get('name', '')}"
        preemptor = by_uid.get(found["uid"])
        if preemptor is None:
            continue  # deleted by the workload: neither judged nor wasted
        mine = int(preemptor.get("spec", {}).get("priority") or 0)
        theirs = submitted.get(involved.get("name", ""), 0)
        if theirs >= mine:
            out.append(("preempted_not_lower", victim, f"priority {theirs} evicted for {mine}"))
        if not preemptor.get("spec", {}).get("nodeName"):
            name = preemptor["metadata"].get("name", "")
            out.append(("wasted_preemption", victim, f"evicted for {name}, which was not bound"))
    return out


def preempted_victims(events: tuple[Obj, ...]) -> set[str]:
    """The uids of the pods topoplace evicted by a preemption (its Preempted Events)."""
    return {
        str((e.get("involvedObject") or {}).get("uid", ""))
        for e in events
        if e.get("reason") == "Preempted" and _PREEMPTED.match(e.get("message") or "")
    }
