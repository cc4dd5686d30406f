"""The registered node policies: the values of hami.io/node-scheduler-policy, each a module exporting `Policy`.

Adding a policy = a module here (see engine/node/policy.py for the contract) and its
line below; it then works for every vendor, which supply only measures. Mode hami
scores every policy HAMi knows by HAMi's usage (hami_usage.py) instead.
"""

from __future__ import annotations

NODE_POLICY_MODULES: tuple[str, ...] = (
    "engine.node.policies.binpack",
    "engine.node.policies.spread",
    "engine.node.policies.fragmentation",
)
