"""AWS Neuron rules as pure functions: families, windows, aligned blocks, NeuronCore runs, choices.

Layouts: trn1.32xlarge = 16 Trainium devices x 2 NeuronCores, inf2.48xlarge =
12 Inferentia2 devices x 2, inf1 = 4 NeuronCores per device (AWS Neuron
architecture documentation).
"""

from __future__ import annotations

import pytest

from engine.node.vendors.neuron.rules import (
    CORES_PER_DEVICE,
    Family,
    NeuronDevice,
    NoFit,
    Option,
    Take,
    choose,
    choose_hami,
    core_options,
    device_groups,
    family_of,
    hami_family_of,
)

TRN, INF = Family.TRAINIUM, Family.INFERENTIA


def node(
    n: int, *, cores: int = 2, used: dict[int, int] | None = None, missing: tuple[int, ...] = ()
) -> list[NeuronDevice]:
    """n devices by index; `used` = cores held per device; `missing` = indices the node does not report."""
    used = used or {}
    return [
        NeuronDevice(index=i, cores=cores, used_cores=used.get(i, 0), held=i in used)
        for i in range(n)
        if i not in missing
    ]


def groups_of(result: list[tuple[int, ...]] | NoFit) -> list[tuple[int, ...]]:
    assert not isinstance(result, NoFit), result
    return result


def takes_of(result: list[Option] | NoFit) -> list[tuple[tuple[int, int], ...]]:
    assert not isinstance(result, NoFit), result
    return [tuple((t.index, t.cores) for t in option.takes) for option in result]


# --- families ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instance_type", "family"),
    [
        ("trn1.32xlarge", TRN),
        ("trn1n.32xlarge", TRN),
        ("trn2.48xlarge", TRN),
        ("inf2.48xlarge", INF),
        ("inf1.24xlarge", INF),
        ("p4d.24xlarge", None),
        ("", None),
    ],
)
def test_family_from_instance_type(instance_type: str, family: Family | None) -> None:
    assert family_of(instance_type) is family


def test_hami_treats_anything_without_inf_as_trainium() -> None:
    assert hami_family_of("") is TRN
    assert hami_family_of("p4d.24xlarge") is TRN
    assert hami_family_of("inf2.xlarge") is INF


def test_cores_per_device_table() -> None:
    assert (CORES_PER_DEVICE["trn1"], CORES_PER_DEVICE["inf2"], CORES_PER_DEVICE["inf1"]) == (2, 2, 4)


# --- Trainium: aligned blocks of 1, 4, 8, 16 ----------------------------------------------------------


@pytest.mark.parametrize("count", [1, 4, 8, 16])
def test_trainium_blocks_are_aligned_on_their_size(count: int) -> None:
    groups = groups_of(device_groups(TRN, node(16), count))
    assert groups == [tuple(range(s, s + count)) for s in range(0, 16, count)]


@pytest.mark.parametrize("count", [2, 3, 5, 6, 7, 9, 12, 15])
def test_trainium_rejects_other_counts_with_the_reason(count: int) -> None:
    result = device_groups(TRN, node(16), count)
    assert isinstance(result, NoFit)
    assert "1, 4, 8 or 16" in result.reason and f"{count} were requested" in result.reason


def test_trainium_four_free_in_a_row_but_unaligned_do_not_fit() -> None:
    devices = node(8, used={0: 2, 1: 2, 6: 2, 7: 2})  # free: 2, 3, 4, 5
    result = device_groups(TRN, devices, 4)
    assert isinstance(result, NoFit)
    assert "aligned block of 4" in result.reason and "2-5" in result.reason


def test_trainium_a_busy_device_breaks_only_its_blocks() -> None:
    devices = node(16, used={9: 1})
    assert groups_of(device_groups(TRN, devices, 8)) == [tuple(range(8))]
    assert groups_of(device_groups(TRN, devices, 4)) == [(0, 1, 2, 3), (4, 5, 6, 7), (12, 13, 14, 15)]


# --- Inferentia: windows of consecutive devices, no wrap-around ---------------------------------------


def test_inferentia_every_window_of_consecutive_free_devices() -> None:
    groups = groups_of(device_groups(INF, node(12), 3))
    assert groups == [tuple(range(s, s + 3)) for s in range(10)]


def test_inferentia_windows_never_wrap_around() -> None:
    # free: 10, 11 and 0 - consecutive only around the ring's end
    devices = node(12, used={i: 2 for i in range(1, 10)})
    result = device_groups(INF, devices, 3)
    assert isinstance(result, NoFit)
    assert "no wrap-around" in result.reason and "longest free run is 2" in result.reason
    assert groups_of(device_groups(INF, devices, 2)) == [(10, 11)]


def test_device_indices_not_list_positions_decide_adjacency() -> None:
    devices = node(7, missing=(3,))  # the node reports 0, 1, 2, 4, 5, 6
    assert groups_of(device_groups(INF, devices, 3)) == [(0, 1, 2), (4, 5, 6)]
    shuffled = [devices[i] for i in (4, 0, 5, 2, 1, 3)]
    assert groups_of(device_groups(INF, shuffled, 3)) == [(0, 1, 2), (4, 5, 6)]
    # Trainium blocks are aligned on the index too: 4-7 is not whole (7 missing) - only 0-3 would be, but 3 is gone
    assert isinstance(device_groups(TRN, devices, 4), NoFit)


def test_ineligible_devices_are_not_free() -> None:
    devices = [NeuronDevice(index=i, cores=2, eligible=i != 1) for i in range(4)]
    assert groups_of(device_groups(INF, devices, 2)) == [(2, 3)]


# --- NeuronCores ---------------------------------------------------------------------------------------


def test_one_core_takes_any_device_with_a_free_core() -> None:
    devices = node(4, used={0: 2, 1: 1})
    assert takes_of(core_options(INF, devices, 1)) == [((1, 1),), ((2, 1),), ((3, 1),)]


def test_two_cores_take_one_device_with_two_free() -> None:
    devices = node(4, used={0: 2, 1: 1})
    assert takes_of(core_options(TRN, devices, 2)) == [((2, 2),), ((3, 2),)]


def test_two_cores_do_not_span_two_half_free_devices() -> None:
    devices = node(2, used={0: 1, 1: 1})
    result = core_options(INF, devices, 2)
    assert isinstance(result, NoFit)
    assert "no Neuron device has 2 free NeuronCore(s)" in result.reason


def test_even_cores_take_half_as_many_whole_devices_as_a_device_request() -> None:
    # 8 cores = 4 whole trn1 devices, in aligned blocks
    assert takes_of(core_options(TRN, node(16), 8)) == [tuple((i, 2) for i in range(s, s + 4)) for s in range(0, 16, 4)]
    # on Inferentia 4 cores = any 2 adjacent whole devices
    assert takes_of(core_options(INF, node(4), 4)) == [((0, 2), (1, 2)), ((1, 2), (2, 2)), ((2, 2), (3, 2))]


def test_even_cores_on_trainium_need_a_legal_device_count() -> None:
    result = core_options(TRN, node(16), 4)  # 2 whole devices: not 1, 4, 8 or 16
    assert isinstance(result, NoFit)
    assert "4 NeuronCores = 2 whole devices" in result.reason and "1, 4, 8 or 16" in result.reason


def test_odd_cores_take_a_contiguous_run_across_adjacent_devices() -> None:
    devices = node(4, used={1: 1})  # device 1 holds its low core; its top core is free
    options = takes_of(core_options(INF, devices, 3))
    # device 0 cannot start a run: it would continue into device 1's held low core.
    # From device 1's free top core: 1 + 2; from whole device 2: 2 + 1; device 3 has no neighbour after it.
    assert options == [((1, 1), (2, 2)), ((2, 2), (3, 1))]
    for option in options:
        assert sum(c for _i, c in option) == 3
        indices = [i for i, _c in option]
        assert indices == list(range(indices[0], indices[0] + len(indices)))


def test_a_run_cannot_pass_through_a_partly_used_device() -> None:
    devices = node(3, used={1: 1})
    # 5 cores from device 0 would need device 1 whole
    assert isinstance(core_options(INF, devices, 5), NoFit)


def test_odd_cores_on_trainium_stay_inside_one_aligned_block() -> None:
    # 5 cores touch 3 devices: they must lie in one aligned block of 4
    options = takes_of(core_options(TRN, node(8), 5))
    starts = [option[0][0] for option in options]
    assert starts == [0, 1, 4, 5]
    # 9 cores touch 5 devices: one aligned block of 8
    assert [o[0][0] for o in takes_of(core_options(TRN, node(16), 9))] == [0, 1, 2, 3, 8, 9, 10, 11]


def test_odd_cores_without_room_say_why() -> None:
    result = core_options(TRN, node(4, used={0: 2, 2: 2}), 3)
    assert isinstance(result, NoFit)
    assert "3 contiguous free NeuronCores" in result.reason


@pytest.mark.parametrize(
    ("cores", "expected"),
    [
        (2, [((0, 2),), ((1, 2),)]),  # fits one 4-core device
        (4, [((0, 4),), ((1, 4),)]),  # one whole device
        (6, [((0, 4), (1, 2))]),  # a run across two devices
        (8, [((0, 4), (1, 4))]),  # two whole devices
    ],
)
def test_four_core_devices(cores: int, expected: list[tuple[tuple[int, int], ...]]) -> None:
    assert takes_of(core_options(INF, node(2, cores=4), cores)) == expected


def test_mixed_core_counts_are_reported() -> None:
    devices = [NeuronDevice(index=0, cores=2), NeuronDevice(index=1, cores=4)]
    result = core_options(INF, devices, 1)
    assert isinstance(result, NoFit) and "different NeuronCore counts" in result.reason


# --- choosing -------------------------------------------------------------------------------------------


def _whole(groups: list[tuple[int, ...]] | NoFit, devices: list[NeuronDevice]) -> list[Option]:
    cores = {d.index: d.cores for d in devices}
    return [Option(tuple(Take(i, cores[i]) for i in g)) for g in groups_of(groups)]


def test_trainium_single_device_goes_to_an_already_broken_block() -> None:
    devices = node(16, used={0: 2})
    chosen = choose(TRN, devices, _whole(device_groups(TRN, devices, 1), devices))
    # devices 1-3 share the broken block 0-3; any other pick would break a whole block of 4 and of 8
    assert chosen.indices[0] in (1, 2, 3)
    assert chosen.indices == (1,)  # the lowest of the equals


def test_trainium_block_of_four_keeps_the_free_block_of_eight() -> None:
    devices = node(16, used={0: 2})
    chosen = choose(TRN, devices, _whole(device_groups(TRN, devices, 4), devices))
    assert chosen.indices == (4, 5, 6, 7)


def test_inferentia_window_goes_to_the_smallest_run_that_fits() -> None:
    devices = node(12, used={3: 2, 4: 2})  # free runs: 0-2 (3) and 5-11 (7)
    chosen = choose(INF, devices, _whole(device_groups(INF, devices, 2), devices))
    assert chosen.indices == (0, 1)


def test_one_core_goes_to_a_partly_used_device_first() -> None:
    devices = node(16, used={5: 1})
    chosen = choose(TRN, devices, core_options(TRN, devices, 1))  # type: ignore[arg-type]
    assert chosen.takes == (Take(5, 1),)


def test_hami_takes_the_first_group_by_index() -> None:
    devices = node(12, used={3: 2, 4: 2})
    options = _whole(device_groups(INF, devices, 2), devices)
    assert choose_hami(options).indices == (0, 1)


def test_hami_single_device_is_the_last_of_its_list() -> None:
    devices = node(4)
    options = _whole(device_groups(INF, devices, 1), devices)
    assert choose_hami(options).indices == (3,)
    assert choose_hami(options, order=[3, 0, 2, 1]).indices == (1,)
