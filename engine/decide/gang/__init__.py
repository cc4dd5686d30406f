"""A gang's decision: every pending member placed inside the lowest network domain that holds them all.

request.py   GangRequest in, GangDecision (each member's node and devices, or the reason) out
input.py     a gang as a user writes it (Volcano PodGroup, Kueue annotations) -> GangRequest
ranks.py     a member's pod index, and the rank order members are laid out in
subgroups.py every subGroupPolicy's subgroups (labelSelector, matchLabelKeys, sizes, minSubGroups)
place.py     the decision: constraints, units, slots, the tier walk, a plan per candidate, the best plan, the minimum
slots.py     how many members of each shape every node takes
tiers.py     the constraint's limit, where running members pin the gang, a tier's candidates
plan.py      members laid out inside one candidate hypernode
nested.py    a subgroup's children laid out inside the domain it takes (nested subgroups)
balance.py   Kueue's balanced placement (TASBalancedPlacement): a preferred level's pods spread evenly
answer.py    the answer from the best plan, or why none fits
refusals.py  why each tier below was refused, and every node's reason in kube's count
claims.py    the members' ResourceClaims allocated jointly with the choice; a ComputeDomain in one clique
"""

from engine.decide.gang.claims import GangClaims
from engine.decide.gang.place import place_gang
from engine.decide.gang.request import ClaimAllocation, GangDecision, GangRequest, MemberPlacement

__all__ = ["ClaimAllocation", "GangClaims", "GangDecision", "GangRequest", "MemberPlacement", "place_gang"]
