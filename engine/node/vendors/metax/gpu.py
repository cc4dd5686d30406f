"""MetaX whole-GPU node preference from the device plugin's node annotations.

MetaX's device plugin publishes, per node, two JSON objects from request
size (number of cards) to an integer: ``metax-tech.com/gpu.topology.losses``
(how much free topology an allocation of that size destroys) and
``metax-tech.com/gpu.topology.scores`` (how good the best set of that size
is). HAMi (pkg/device/metax/device.go, ScoreNode) reads only one:

- node policy binpack: 2000 - losses[n], higher preferred;
- node policy spread: 2000 - scores[n], LOWER preferred (HAMi's spread
  picks the lowest node score), i.e. a higher topology score wins.

Both read as "higher is better" here: binpack -> 2000 - loss,
spread -> score (which is 2000 minus HAMi's number). The engine's node policies
ask by direction (`direction`: BINPACK for a policy that packs, SPREAD for one
that spreads), so every policy reads one of the two.

HAMi gives 0 when the annotation it wants is missing and the parsed value 0
when the size is missing or the JSON is bad, so the preference is silently
lost (and under spread a node WITHOUT data becomes the most preferred). The
default mode falls back to the other annotation instead and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import msgspec

LOSSES_ANNOTATION = "metax-tech.com/gpu.topology.losses"
SCORES_ANNOTATION = "metax-tech.com/gpu.topology.scores"
SCORE_BASE = 2000

BINPACK = "binpack"
SPREAD = "spread"

_size_map = msgspec.json.Decoder(dict[int, int])


class TopologyPreference(msgspec.Struct, frozen=True, kw_only=True):
    """A node's whole-GPU preference for one request size (higher is better)."""

    value: float
    source: str  # "losses", "scores" or "none": which annotation gave the value
    warning: str = ""  # set when the wanted annotation was missing or unreadable


def read_size_map(annotations: Mapping[str, str], key: str) -> tuple[dict[int, int] | None, str]:
    """Decode one annotation; (None, why) when absent or malformed."""
    raw = annotations.get(key)
    if raw is None:
        return None, f"node annotation {key} is missing"
    try:
        return _size_map.decode(raw), ""
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return None, f"node annotation {key} is not a JSON object of size to integer ({exc})"


def _lookup(annotations: Mapping[str, str], key: str, size: int) -> tuple[int | None, str]:
    values, why = read_size_map(annotations, key)
    if values is None:
        return None, why
    if size not in values:
        return None, f"node annotation {key} has no entry for {size} card(s)"
    return values[size], ""


def _from_losses(loss: int) -> float:
    return float(SCORE_BASE - loss)


def _from_scores(score: int) -> float:
    return float(score)


def preference(annotations: Mapping[str, str], size: int, direction: str) -> TopologyPreference:
    """The default mode: the policy's annotation, else the other one, else 0 with a warning."""
    losses = (LOSSES_ANNOTATION, "losses", _from_losses)
    scores = (SCORES_ANNOTATION, "scores", _from_scores)
    order: tuple[tuple[str, str, Callable[[int], float]], ...] = (
        (scores, losses) if direction == SPREAD else (losses, scores)
    )
    problems: list[str] = []
    for key, source, convert in order:
        value, why = _lookup(annotations, key, size)
        if value is not None:
            warning = "" if not problems else f"{problems[0]}; used {key} instead"
            return TopologyPreference(value=convert(value), source=source, warning=warning)
        problems.append(why)
    return TopologyPreference(value=0.0, source="none", warning="; ".join(problems) + "; no topology preference")


def hami_preference(annotations: Mapping[str, str], size: int, direction: str) -> TopologyPreference:
    """HAMi's ScoreNode, on the higher-is-better scale (missing data included)."""
    key = SCORES_ANNOTATION if direction == SPREAD else LOSSES_ANNOTATION
    source = "scores" if direction == SPREAD else "losses"
    if key not in annotations:
        # HAMi: binpack scores 0; spread scores 0, the best spread value = 2000 here.
        value = float(SCORE_BASE) if direction == SPREAD else 0.0
        return TopologyPreference(value=value, source="none", warning=f"node annotation {key} is missing")
    values, why = read_size_map(annotations, key)
    parsed = 0 if values is None else values.get(size, 0)  # HAMi parses a missing entry as 0
    warning = why
    if values is not None and size not in values:
        warning = f"node annotation {key} has no entry for {size} card(s)"
    hami_raw = SCORE_BASE - parsed
    value = float(hami_raw) if direction != SPREAD else float(SCORE_BASE - hami_raw)
    return TopologyPreference(value=value, source=source, warning=warning)
