"""Which mechanism makes a node honour a placement's device choice.

- `dra`: a ResourceClaim allocation; the kubelet runs the pod only with those devices.
- `hami`: HAMi's device plugin reads HAMi's pod annotations in Allocate and gives the
  container exactly the annotated GPUs (HAMi-core limits memory and cores).
- `device-plugin`: a plain device plugin picks the devices itself; only the node is
  enforced, the device choice is advice.

Per node: the label `topoplace.io/enforcement` when set, else detected (HAMi's node
registration annotation means `hami`), else the configured default.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping


class Enforcement(enum.StrEnum):
    DRA = "dra"
    HAMI = "hami"
    DEVICE_PLUGIN = "device-plugin"


ENFORCEMENT_LABEL = "topoplace.io/enforcement"
# HAMi's device plugin registers the node's GPUs here: its presence means HAMi runs on the node.
HAMI_REGISTER_ANNOTATION = "hami.io/node-nvidia-register"
AUTO = "auto"
CHOICES: tuple[str, ...] = (AUTO, *(e.value for e in Enforcement))


class EnforcementChoice(enum.StrEnum):
    """Where a node's enforcement came from (shown by `topo show` and `--explain`)."""

    LABEL = "label"
    DETECTED = "detected"
    DEFAULT = "default"


def parse_enforcement(text: str, field: str) -> Enforcement | None:
    """`auto` -> None; a known mechanism -> it; anything else raises ValueError naming the field."""
    value = text.strip().lower()
    if value == AUTO:
        return None
    try:
        return Enforcement(value)
    except ValueError:
        raise ValueError(f"{field}: unknown enforcement {text!r} (allowed: {', '.join(CHOICES)})") from None


def node_enforcement(
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    default: Enforcement | None = None,
) -> tuple[Enforcement, EnforcementChoice]:
    """The node's enforcement and where it came from.

    A label with a value we do not know is ignored (detection decides), so a typo on
    one node never stops placement; `default` None means auto detection only.
    """
    labelled = labels.get(ENFORCEMENT_LABEL)
    if labelled is not None:
        try:
            chosen = parse_enforcement(labelled, ENFORCEMENT_LABEL)
        except ValueError:
            chosen = None
        if chosen is not None:
            return chosen, EnforcementChoice.LABEL
    if HAMI_REGISTER_ANNOTATION in annotations:
        return Enforcement.HAMI, EnforcementChoice.DETECTED
    if default is not None:
        return default, EnforcementChoice.DEFAULT
    return Enforcement.DEVICE_PLUGIN, EnforcementChoice.DEFAULT
