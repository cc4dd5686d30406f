"""MetaX rules as pure functions: zone scores, exclusive choice, QoS, app classes, whole-card annotations.

Expectations come from the rules (HAMi pkg/device/metax), written out per case.
"""

from __future__ import annotations

import itertools
import random

import pytest

from engine.node.vendors.metax import gpu as metax_gpu
from engine.node.vendors.metax.qos import (
    app_class_accepts,
    card_qos,
    online_card_score,
    online_preference,
    qos_accepts,
)
from engine.node.vendors.metax.zones import (
    ZONE_PAIR_SCORE,
    best_exclusive_choice,
    hami_exclusive_choice,
    zone_node_score,
    zone_set_score,
)
from schemas.topology import Device, Vendor


def card(index: int, zone: int | None) -> Device:
    return Device(
        index=index, uuid=f"MX-{index}", vendor=Vendor.METAX, model="MXC500", memory_mib=65536, link_zone=zone
    )


def cards(zones: dict[int, int | None]) -> list[Device]:
    return [card(i, z) for i, z in sorted(zones.items())]


def pairs(k: int) -> int:
    return k * (k - 1) // 2


# --- zone score -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("zones", "expected_pairs"),
    [
        ([], 0),
        ([1], 0),
        ([1, 1], 1),
        ([1, 2], 0),
        ([1, 1, 1], 3),
        ([1, 1, 2], 1),
        ([1, 1, 2, 2], 2),
        ([None, None], 0),  # no zone
        ([0, 0], 0),  # zone 0 = none
        ([-1, -1], 0),  # a negative zone is no zone either (HAMi's prioritize: <= 0)
    ],
)
def test_zone_set_score_is_ten_per_same_zone_pair(zones: list[int | None], expected_pairs: int) -> None:
    devices = [card(i, z) for i, z in enumerate(zones)]
    assert zone_set_score(devices) == ZONE_PAIR_SCORE * expected_pairs


def test_zone_set_score_counts_a_card_once() -> None:
    a = card(0, 1)
    assert zone_set_score([a, a]) == 0


@pytest.mark.parametrize("taken", [1, 2, 3, 4])
def test_node_score_is_ten_times_allocated_minus_loss(taken: int) -> None:
    # 8 idle cards, 4 + 4 in zones 1 and 2; the pod takes `taken` cards of zone 1.
    idle = cards({i: 1 if i < 4 else 2 for i in range(8)})
    chosen = idle[:taken]
    score = zone_node_score(chosen, idle)
    allocated = ZONE_PAIR_SCORE * pairs(taken)
    before = ZONE_PAIR_SCORE * (pairs(4) + pairs(4))
    after = ZONE_PAIR_SCORE * (pairs(4 - taken) + pairs(4))
    assert score.allocated == allocated
    assert score.idle_before == before
    assert score.idle_after == after
    # the loss is exactly the same-zone pairs cut between the allocation and the rest of its zone
    assert score.loss == before - allocated - after == ZONE_PAIR_SCORE * taken * (4 - taken)
    assert score.node_score == 10 * allocated - score.loss


# --- HAMi's exclusive choice --------------------------------------------------------------------


def test_hami_takes_the_smallest_zone_that_holds_enough() -> None:
    candidates = cards({0: 1, 1: 1, 2: 1, 3: 1, 4: 2, 5: 2})
    chosen = hami_exclusive_choice(candidates, 2)
    assert [d.index for d in chosen] == [4, 5]


def test_hami_equal_zones_tie_goes_to_the_lower_zone_number() -> None:
    candidates = cards({0: 2, 1: 2, 2: 1, 3: 1})
    chosen = hami_exclusive_choice(candidates, 2)
    assert {d.link_zone for d in chosen} == {1}


def test_hami_keeps_candidate_order_inside_a_zone() -> None:
    candidates = list(reversed(cards({0: 1, 1: 1, 2: 1, 3: 1})))  # HAMi walks its list from the end
    chosen = hami_exclusive_choice(candidates, 2)
    assert [d.index for d in chosen] == [3, 2]


def test_hami_fills_zones_smallest_first_when_none_holds_enough() -> None:
    candidates = cards({0: 1, 1: 1, 2: 2, 3: 2, 4: 2})
    chosen = hami_exclusive_choice(candidates, 4)
    # zone 1 (2 cards) first, then the first 2 of zone 2
    assert [d.index for d in chosen] == [0, 1, 2, 3]


def test_hami_adds_zoneless_cards_last() -> None:
    candidates = cards({0: None, 1: 1, 2: 1, 3: None, 4: 0})
    chosen = hami_exclusive_choice(candidates, 4)
    assert [d.index for d in chosen][:2] == [1, 2]
    assert {d.index for d in chosen[2:]} <= {0, 3, 4}


def test_hami_returns_all_candidates_when_not_more_than_needed() -> None:
    candidates = cards({0: 2, 1: 1})
    assert hami_exclusive_choice(candidates, 2) == tuple(candidates)


# --- the default mode's optimum -------------------------------------------------------------------


def test_default_takes_the_smallest_sufficient_zone_like_hami() -> None:
    candidates = cards({0: 1, 1: 1, 2: 1, 3: 1, 4: 2, 5: 2})
    assert [d.index for d in best_exclusive_choice(candidates, 2, candidates)] == [4, 5]


def test_default_beats_hami_zone_filling_on_internal_score() -> None:
    # zones 1: 2 cards, 2: 3 cards, 3: 3 cards; 4 cards wanted, no zone holds 4.
    candidates = cards({0: 1, 1: 1, 2: 2, 3: 2, 4: 2, 5: 3, 6: 3, 7: 3})
    hami = hami_exclusive_choice(candidates, 4)
    best = best_exclusive_choice(candidates, 4, candidates)
    # HAMi: zone 1 whole (1 pair) + 2 of zone 2 (1 pair); best: zone 2 whole (3 pairs) + 1 card.
    assert zone_set_score(hami) == ZONE_PAIR_SCORE * 2
    assert zone_set_score(best) == ZONE_PAIR_SCORE * 3
    # the odd card comes from zone 1 (cuts 1 pair) rather than zone 3 (cuts 2)
    assert [d.index for d in best] == [0, 2, 3, 4]
    assert zone_node_score(best, candidates).loss == ZONE_PAIR_SCORE * 1


def test_default_single_card_prefers_one_that_breaks_no_zone() -> None:
    candidates = cards({0: 1, 1: 1, 2: 1, 3: 1, 4: None})
    assert [d.index for d in best_exclusive_choice(candidates, 1, candidates)] == [4]


def test_default_counts_idle_non_candidates_in_the_loss() -> None:
    # Cards 0-1 are idle but excluded (e.g. by a uuid pin): taking zone 1's card 2 cuts pairs with them.
    idle = cards({0: 1, 1: 1, 2: 1, 3: 2, 4: 2})
    candidates = [d for d in idle if d.index >= 2]
    chosen = best_exclusive_choice(candidates, 1, idle)
    # card 2 cuts 2 pairs (with 0 and 1), card 3 or 4 cuts 1: take card 3.
    assert [d.index for d in chosen] == [3]


def _brute_force(candidates: list[Device], count: int, idle: list[Device]) -> tuple[int, int]:
    best_internal, best_loss = -1, 0
    for combo in itertools.combinations(candidates, count):
        score = zone_node_score(combo, idle)
        if score.allocated > best_internal or (score.allocated == best_internal and score.loss < best_loss):
            best_internal, best_loss = score.allocated, score.loss
    return best_internal, best_loss


def test_default_equals_brute_force_on_random_nodes() -> None:
    rng = random.Random(20261122)
    for _ in range(300):
        n = rng.randint(1, 10)
        idle = [card(i, rng.choice([None, 0, -1, 1, 1, 2, 2, 3])) for i in range(n)]
        candidates = [d for d in idle if rng.random() < 0.85] or idle[:1]
        count = rng.randint(1, len(candidates))
        chosen = best_exclusive_choice(candidates, count, idle)
        assert len(chosen) == count
        assert {d.index for d in chosen} <= {d.index for d in candidates}
        got = zone_node_score(chosen, idle)
        assert (got.allocated, got.loss) == _brute_force(candidates, count, idle)


def test_default_is_deterministic_under_candidate_order() -> None:
    candidates = cards({0: 1, 1: 1, 2: 2, 3: 2, 4: None, 5: 3})
    forward = best_exclusive_choice(candidates, 3, candidates)
    backward = best_exclusive_choice(list(reversed(candidates)), 3, candidates)
    assert forward == backward


# --- QoS ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("running", "in_use", "wanted", "cores", "accepted"),
    [
        ("fixed-share", False, "best-effort", 30, True),  # an idle card takes any QoS
        ("fixed-share", True, "fixed-share", 30, True),
        ("fixed-share", True, "best-effort", 30, False),
        ("burst-share", True, "fixed-share", 30, False),
        ("fixed-share", True, "best-effort", 100, True),  # exclusive requests are exempt
        ("", True, "burst-share", 30, True),  # no QoS recorded yet
    ],
)
def test_qos_acceptance(running: str, in_use: bool, wanted: str, cores: int, accepted: bool) -> None:
    assert qos_accepts(running, in_use, wanted, cores) is accepted


def test_card_qos_is_its_first_holders() -> None:
    assert card_qos(()) == ""
    assert card_qos(("", "fixed-share", "best-effort")) == "fixed-share"


# --- application classes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("on_card", "wanted", "accepted"),
    [
        ((), "", True),
        ((), "online", True),
        ((), "offline", True),
        (("",), "", True),
        (("",), "online", False),  # classed and ordinary pods never share a card
        (("",), "offline", False),
        (("online",), "", False),
        (("online",), "online", True),
        (("online",), "offline", False),  # an online pod suspends offline work
        (("offline",), "offline", True),
        (("offline",), "online", True),
        (("offline",), "", False),
        (("online", "offline"), "online", True),
    ],
)
def test_app_class_acceptance(on_card: tuple[str, ...], wanted: str, accepted: bool) -> None:
    assert app_class_accepts(on_card, wanted) is accepted


def test_online_pods_prefer_fewer_online_then_fewer_offline_and_avoid_offline_only_cards() -> None:
    on_cards = {
        "empty": (),
        "one-online": ("online",),
        "mixed": ("online", "offline"),
        "offline-only": ("offline",),
    }
    ranked = sorted(on_cards, key=lambda name: online_preference(on_cards[name]))
    assert ranked == ["empty", "one-online", "mixed", "offline-only"]


def test_online_card_penalty() -> None:
    assert online_card_score(()) == 0
    assert online_card_score(("offline", "offline")) == -200
    assert online_card_score(("online", "offline")) == -22


# --- whole cards: node annotations ---------------------------------------------------------------

LOSSES = metax_gpu.LOSSES_ANNOTATION
SCORES = metax_gpu.SCORES_ANNOTATION


def test_binpack_reads_losses() -> None:
    pref = metax_gpu.preference({LOSSES: '{"1": 0, "2": 120}', SCORES: '{"2": 900}'}, 2, "binpack")
    assert (pref.value, pref.source, pref.warning) == (2000 - 120, "losses", "")


def test_spread_reads_scores() -> None:
    pref = metax_gpu.preference({LOSSES: '{"2": 120}', SCORES: '{"2": 900}'}, 2, "spread")
    assert (pref.value, pref.source, pref.warning) == (900, "scores", "")


def test_binpack_falls_back_to_scores_and_says_so() -> None:
    pref = metax_gpu.preference({SCORES: '{"2": 900}'}, 2, "binpack")
    assert (pref.value, pref.source) == (900, "scores")
    assert LOSSES in pref.warning and "missing" in pref.warning


def test_spread_falls_back_to_losses() -> None:
    pref = metax_gpu.preference({LOSSES: '{"4": 300}'}, 4, "spread")
    assert (pref.value, pref.source) == (2000 - 300, "losses")
    assert SCORES in pref.warning


@pytest.mark.parametrize("losses", ['{"1": 5}', "not json", '{"2": "many"}'])
def test_a_missing_size_or_bad_json_falls_back_too(losses: str) -> None:
    pref = metax_gpu.preference({LOSSES: losses, SCORES: '{"2": 700}'}, 2, "binpack")
    assert (pref.value, pref.source) == (700, "scores")
    assert pref.warning


def test_no_data_gives_no_preference_with_a_warning() -> None:
    pref = metax_gpu.preference({}, 2, "binpack")
    assert (pref.value, pref.source) == (0, "none")
    assert LOSSES in pref.warning and SCORES in pref.warning


def test_hami_loses_the_preference_silently() -> None:
    # binpack without losses: HAMi scores 0 even though scores are there
    assert metax_gpu.hami_preference({SCORES: '{"2": 900}'}, 2, "binpack").value == 0
    # spread without scores: HAMi's 0 is the best spread score (2000 on our scale)
    assert metax_gpu.hami_preference({LOSSES: '{"2": 10}'}, 2, "spread").value == 2000
    # a missing size parses as 0: binpack 2000 - 0, spread 2000 - (2000 - 0) = 0
    assert metax_gpu.hami_preference({LOSSES: '{"1": 10}'}, 2, "binpack").value == 2000
    assert metax_gpu.hami_preference({SCORES: '{"1": 10}'}, 2, "spread").value == 0
    # with data HAMi and the default mode agree
    assert metax_gpu.hami_preference({LOSSES: '{"2": 10}'}, 2, "binpack").value == 1990
    assert metax_gpu.hami_preference({SCORES: '{"2": 800}'}, 2, "spread").value == 800
