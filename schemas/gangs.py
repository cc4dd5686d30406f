"""Gangs as Volcano and Kueue describe them, read into the event contract's terms.

- Volcano: a PodGroup (`scheduling.volcano.sh/v1beta1`), members joined by the
  pod annotation `scheduling.k8s.io/group-name`; `spec.minMember`,
  `spec.networkTopology` {mode hard|soft, highestTierAllowed | highestTierName},
  `spec.subGroupPolicy[]` {name, subGroupSize, minSubGroups, labelSelector,
  matchLabelKeys, networkTopology}, every one of them.
- Kueue: pod annotations `kueue.x-k8s.io/pod-group-name`,
  `kueue.x-k8s.io/pod-group-total-count` (the gang's size), and the topology
  requests `kueue.x-k8s.io/podset-required-topology` (hard),
  `podset-preferred-topology` (soft), `podset-slice-required-topology` with
  `podset-slice-size` (slices of that many pods, each within that level). A
  level is named by its node-label key, which is also the tier's name in a
  tree built from Kueue's levels. Also read: `podset-unconstrained-topology` (a boolean; true:
  no topology requirement, as no annotation: the gang may use the whole tree, tightest first),
  `podset-slice-required-topology-constraints` (TASMultiLayerTopology, beta and on by default in
  Kueue v0.19: a JSON list of 1 to 3 {topology, size}, coarsest first, each size dividing the one
  above; each layer a slice policy whose `parent` is the layer above, so each slice of a layer
  is laid out inside its enclosing slice's domain), and
  `podset-group-name` (pod sets placed in one domain: a pod group is already one gang, so this
  only checks that the group names a required or preferred level, as Kueue's webhook does).
  Kueue's precedence: required, else preferred, else unconstrained.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from schemas.errors import FieldError
from schemas.events import LabelSelector, LabelSelectorRequirement, NetworkConstraint, SubGroupPolicy, TopologyMode

VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
KUEUE_GROUP = "kueue.x-k8s.io/pod-group-name"
KUEUE_TOTAL = "kueue.x-k8s.io/pod-group-total-count"
KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
KUEUE_SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
KUEUE_SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
KUEUE_UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
KUEUE_SLICE_LAYERS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
KUEUE_PODSET_GROUP = "kueue.x-k8s.io/podset-group-name"
KUEUE_BALANCED_PLACEMENT = "TASBalancedPlacement"  # Kueue's feature gate (alpha, off by default)


class NetworkTopologySpec(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    mode: str = "hard"
    highest_tier_allowed: int | None = None
    highest_tier_name: str = ""


class LabelSelectorRequirementSpec(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    operator: str
    values: tuple[str, ...] = ()


class LabelSelectorSpec(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    """metav1.LabelSelector as written (matchLabels, matchExpressions)."""

    match_labels: dict[str, str] = {}
    match_expressions: tuple[LabelSelectorRequirementSpec, ...] = ()


class SubGroupPolicySpec(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    name: str = ""
    label_selector: LabelSelectorSpec | None = None
    network_topology: NetworkTopologySpec | None = None
    sub_group_size: int | None = None
    min_sub_groups: int | None = None
    match_label_keys: tuple[str, ...] = ()


class PodGroupSpec(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    min_member: int = 1
    min_resources: dict[str, str] = {}
    network_topology: NetworkTopologySpec | None = None
    sub_group_policy: tuple[SubGroupPolicySpec, ...] = ()


class PodGroupMeta(msgspec.Struct, frozen=True, kw_only=True):
    name: str = ""
    namespace: str = "default"


class PodGroup(msgspec.Struct, frozen=True, kw_only=True):
    """A Volcano PodGroup as `kubectl get podgroup -o json` prints it (the fields read)."""

    metadata: PodGroupMeta = PodGroupMeta()
    spec: PodGroupSpec = PodGroupSpec()


def network_constraint(spec: NetworkTopologySpec | None, field: str) -> NetworkConstraint | None:
    """Volcano's networkTopology as the contract's NetworkConstraint; FieldError names a bad field."""
    if spec is None:
        return None
    try:
        mode = TopologyMode(spec.mode or "hard")
    except ValueError:
        raise FieldError(f"{field}.mode", f"must be hard or soft, got {spec.mode!r}") from None
    if spec.highest_tier_allowed is not None and spec.highest_tier_name:
        raise FieldError(field, "highestTierAllowed and highestTierName cannot both be set")
    # Tier 0 is allowed: a multi-node NVLink domain sits one tier below the lowest switch tier.
    if spec.highest_tier_allowed is not None and spec.highest_tier_allowed < 0:
        raise FieldError(f"{field}.highestTierAllowed", f"must not be negative, got {spec.highest_tier_allowed}")
    return NetworkConstraint(
        mode=mode, highest_tier=spec.highest_tier_allowed, highest_tier_name=spec.highest_tier_name
    )


def volcano_policy(group: PodGroup) -> tuple[NetworkConstraint | None, tuple[SubGroupPolicy, ...]]:
    """A PodGroup's network constraint and subgroup policies."""
    network = network_constraint(group.spec.network_topology, "spec.networkTopology")
    policies: list[SubGroupPolicy] = []
    for i, spec in enumerate(group.spec.sub_group_policy):
        field = f"spec.subGroupPolicy[{i}]"
        if spec.sub_group_size is not None and spec.sub_group_size < 1:
            raise FieldError(f"{field}.subGroupSize", f"must be at least 1, got {spec.sub_group_size}")
        if spec.min_sub_groups is not None and spec.min_sub_groups < 0:
            raise FieldError(f"{field}.minSubGroups", f"must not be negative, got {spec.min_sub_groups}")
        policies.append(
            SubGroupPolicy(
                name=spec.name,
                sub_group_size=spec.sub_group_size or 0,
                min_sub_groups=spec.min_sub_groups or 0,
                match_label_keys=spec.match_label_keys,
                label_selector=_selector(spec.label_selector, f"{field}.labelSelector"),
                network=network_constraint(spec.network_topology, f"{field}.networkTopology"),
            )
        )
    return network, tuple(policies)


SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _selector(spec: LabelSelectorSpec | None, field: str) -> LabelSelector | None:
    """The selector in the contract's terms; FieldError for an operator Kubernetes does not know."""
    if spec is None:
        return None
    for i, req in enumerate(spec.match_expressions):
        if req.operator not in SELECTOR_OPERATORS:
            allowed = ", ".join(SELECTOR_OPERATORS)
            reason = f"must be one of {allowed}, got {req.operator!r}"
            raise FieldError(f"{field}.matchExpressions[{i}].operator", reason)
    expressions = tuple(
        LabelSelectorRequirement(key=e.key, operator=e.operator, values=e.values) for e in spec.match_expressions
    )
    return LabelSelector(match_labels=dict(spec.match_labels), match_expressions=expressions)


def kueue_group(annotations: Mapping[str, str]) -> tuple[str, int] | None:
    """(group name, total count) of a pod in a Kueue pod group; None when it is in none."""
    name = annotations.get(KUEUE_GROUP)
    if not name:
        return None
    text = annotations.get(KUEUE_TOTAL, "")
    try:
        total = int(text)
    except ValueError:
        raise FieldError(f"metadata.annotations[{KUEUE_TOTAL}]", f"must be a whole number, got {text!r}") from None
    if total < 1:
        raise FieldError(f"metadata.annotations[{KUEUE_TOTAL}]", f"must be at least 1, got {total}")
    return name, total


def kueue_policy(annotations: Mapping[str, str]) -> tuple[NetworkConstraint | None, tuple[SubGroupPolicy, ...]]:
    """A Kueue pod set's topology request: required = hard, preferred = soft, a slice = a subgroup."""
    network: NetworkConstraint | None = None
    if annotations.get(KUEUE_REQUIRED):
        network = NetworkConstraint(mode=TopologyMode.HARD, highest_tier_name=annotations[KUEUE_REQUIRED])
    elif annotations.get(KUEUE_PREFERRED):
        network = NetworkConstraint(mode=TopologyMode.SOFT, highest_tier_name=annotations[KUEUE_PREFERRED])
    elif KUEUE_UNCONSTRAINED in annotations:
        _boolean(annotations[KUEUE_UNCONSTRAINED], f"metadata.annotations[{KUEUE_UNCONSTRAINED}]")
    if annotations.get(KUEUE_PODSET_GROUP) and network is None:
        reason = f"a pod set group needs {KUEUE_REQUIRED} or {KUEUE_PREFERRED}"
        raise FieldError(f"metadata.annotations[{KUEUE_PODSET_GROUP}]", reason)
    if KUEUE_SLICE_LAYERS in annotations:
        return network, _slice_layers(annotations)
    level = annotations.get(KUEUE_SLICE_REQUIRED)
    if not level:
        return network, ()
    text = annotations.get(KUEUE_SLICE_SIZE, "")
    field = f"metadata.annotations[{KUEUE_SLICE_SIZE}]"
    try:
        size = int(text)
    except ValueError:
        raise FieldError(field, f"must be a whole number with {KUEUE_SLICE_REQUIRED}, got {text!r}") from None
    if size < 1:
        raise FieldError(field, f"must be at least 1, got {size}")
    return network, (_slice_policy(size, level),)


def _slice_policy(size: int, level: str, name: str = "slice", parent: str = "") -> SubGroupPolicy:
    return SubGroupPolicy(
        name=name,
        sub_group_size=size,
        network=NetworkConstraint(mode=TopologyMode.HARD, highest_tier_name=level),
        parent=parent,
    )


_TRUE, _FALSE = ("1", "t", "T", "TRUE", "true", "True"), ("0", "f", "F", "FALSE", "false", "False")


def _boolean(text: str, field: str) -> bool:
    """Go's strconv.ParseBool, as Kueue reads the annotation."""
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise FieldError(field, f"must be true or false, got {text!r}")


class SliceLayer(msgspec.Struct, frozen=True, kw_only=True):
    topology: str = ""
    size: int = 0


def _slice_layers(annotations: Mapping[str, str]) -> tuple[SubGroupPolicy, ...]:
    """Kueue's multi-layer slices, validated as its webhook does: "slice", then "slice2" inside each, ..."""
    field = f"metadata.annotations[{KUEUE_SLICE_LAYERS}]"
    for other in (KUEUE_SLICE_REQUIRED, KUEUE_SLICE_SIZE, KUEUE_PODSET_GROUP):
        if other in annotations:
            raise FieldError(field, f"may not be set with {other}")
    try:
        layers = msgspec.json.decode(annotations[KUEUE_SLICE_LAYERS], type=tuple[SliceLayer, ...])
    except msgspec.DecodeError as exc:
        raise FieldError(field, f"must be a JSON list of {{topology, size}}: {exc}") from None
    if not 1 <= len(layers) <= 3:
        raise FieldError(field, f"must hold 1 to 3 layers, got {len(layers)}")
    for i, layer in enumerate(layers):
        if not layer.topology:
            raise FieldError(f"{field}[{i}].topology", "must name a topology level")
        if layer.size < 1:
            raise FieldError(f"{field}[{i}].size", f"must be at least 1, got {layer.size}")
        if layer.topology in (other.topology for other in layers[:i]):
            raise FieldError(f"{field}[{i}].topology", f"{layer.topology!r} is given twice")
        if i and layers[i - 1].size % layer.size:
            raise FieldError(f"{field}[{i}].size", f"must evenly divide the layer above ({layers[i - 1].size})")
    names = ["slice", *(f"slice{i + 1}" for i in range(1, len(layers)))]
    return tuple(
        _slice_policy(layer.size, layer.topology, names[i], names[i - 1] if i else "") for i, layer in enumerate(layers)
    )
