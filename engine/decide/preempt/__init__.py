"""Preemption: where a pending pod runs by evicting lower-priority pods, and which (kube's DefaultPreemption).

    model.py     what it reads (RunningPod, DisruptionBudget, Preemptor) and answers (Preemption, Victim)
    budgets.py   PodDisruptionBudgets: which victims would violate one
    room.py      the preemptor's fit on a node once some pods are gone; failures no eviction cures
    victims.py   the victims on one node: kube's reprieve, the device holders chosen by the link score
    choose.py    eligibility, the candidate nodes, the node chosen, kube's messages
    search.py    which nodes are tried: one per shape, only those that can still win (every node's answer)
    shapes.py    nodes a preemptor cannot tell apart, whose victims are the same position for position
    bounds.py    the least victim cost a group of shapes can have, and the groups walked in that order
    gang.py      a gang's preemption: the domain of least cost at the lowest tier (Volcano, KEP-5710)
    gang_domain.py  the victims in one domain: whole victim gangs or only their spare members
    nominated.py the room of pods nominated to a node, held from pods of lower or equal priority

`Engine.preempt(snapshot, preemptor, running, budgets)` runs it; the answer
says which pods to evict and where the preemptor is nominated. Carrying it out
(DisruptionTarget, deletion, nominatedNodeName, the freed devices held for the
preemptor) is the binder's.
"""

from engine.decide.preempt.model import (
    DEFAULT_PRIORITY,
    PREEMPT_LOWER_PRIORITY,
    PREEMPT_NEVER,
    Candidate,
    CountOnly,
    DisruptionBudget,
    Preemption,
    Preemptor,
    RunningPod,
    Victim,
)

__all__ = [
    "DEFAULT_PRIORITY",
    "PREEMPT_LOWER_PRIORITY",
    "PREEMPT_NEVER",
    "Candidate",
    "CountOnly",
    "DisruptionBudget",
    "Preemption",
    "Preemptor",
    "RunningPod",
    "Victim",
]
