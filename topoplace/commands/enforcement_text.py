"""One line saying how a node enforces a device choice, for `topo show` and `engine place --explain`."""

from __future__ import annotations

import os
from collections.abc import Mapping

from schemas import hami
from schemas.enforcement import ENFORCEMENT_LABEL, HAMI_REGISTER_ANNOTATION, Enforcement, EnforcementChoice
from schemas.enforcement import node_enforcement as choose
from topoplace.config import ENFORCEMENT, ConfigError, Settings

WHAT = {
    Enforcement.DRA: "the ResourceClaim's allocation: the devices are enforced",
    Enforcement.HAMI: "HAMi's device plugin reads HAMi's pod annotations: the devices are enforced",
    Enforcement.DEVICE_PLUGIN: "plain device plugin: only the node is enforced, the device choice is advice",
}


def configured_default(environ: Mapping[str, str] = os.environ) -> Enforcement | None:
    """TOPOPLACE_ENFORCEMENT as the services read it (None: auto); raises ValueError when invalid."""
    try:
        chosen = Settings.from_env({ENFORCEMENT: environ.get(ENFORCEMENT, "")}).enforcement
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return Enforcement(chosen) if chosen else None


def enforcement_line(labels: Mapping[str, str], annotations: Mapping[str, str], default: Enforcement | None) -> str:
    mechanism, source = choose(labels, annotations, default)
    why = {
        EnforcementChoice.LABEL: f"label {ENFORCEMENT_LABEL}",
        EnforcementChoice.DETECTED: f"detected: {HAMI_REGISTER_ANNOTATION}",
        EnforcementChoice.DEFAULT: f"default, {ENFORCEMENT}" if default is not None else "default",
    }[source]
    line = f"enforcement: {mechanism.value} ({why}); {WHAT[mechanism]}"
    cordoned = hami.cordoned_uuids(annotations)
    if cordoned:
        line += f"; cordoned by {hami.DEVICE_CORDON}: {', '.join(sorted(cordoned))}"
    return line
