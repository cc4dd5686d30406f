"""What one engine's decisions are made with: its plugins and its tables, level by level."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.decide.gang.slots import SlotTables
from engine.decide.kube.feasible import FeasibleTables
from engine.decide.kube.resource_ranking import ResourceRankings
from engine.decide.node_rules import NodeFactsTable
from engine.decide.ranking import ClassAnswers
from engine.node.answer import NodeAnswers
from engine.node.registry import Vendors


@dataclass(frozen=True)
class DecisionParts:
    """One engine's plugins, node answers, class answers and rankings, parsed node facts and gang slots."""

    vendors: Vendors
    node: NodeAnswers
    classes: ClassAnswers
    facts: NodeFactsTable
    slots: SlotTables
    feasible: FeasibleTables = field(default_factory=FeasibleTables)  # nodes passing a pod's base rules
    resource_rankings: ResourceRankings = field(default_factory=ResourceRankings)  # by kube's resource scores
