"""schemas.quantity against apimachinery's own quantity table (resource/quantity_test.go)."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from schemas.quantity import QuantityError, milli_value, parse_quantity, value

INT64_MAX = 2**63 - 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # binary suffixes
        ("0", "0"),
        ("0Ki", "0"),
        ("5Ki", 5 * 2**10),
        ("7Mi", 7 * 2**20),
        ("6Gi", 6 * 2**30),
        ("5Ti", 5 * 2**40),
        ("4Pi", 4 * 2**50),
        ("3Ei", 3 * 2**60),
        ("100Ti", 100 * 2**40),
        # decimal suffixes
        ("5n", "5e-9"),
        ("4u", "4e-6"),
        ("3m", "3e-3"),
        ("9", "9"),
        ("8k", "8e3"),
        ("50k", "5e4"),
        ("7M", "7e6"),
        ("6G", "6e9"),
        ("5T", "5e12"),
        ("2P", "2e15"),
        ("1E", "1e18"),
        # decimal exponents
        ("1E-3", "1e-3"),
        ("1e3", "1e3"),
        ("1E6", "1e6"),
        ("1e0", "1"),
        ("1.3E+6", "1.3e6"),
        ("1.53E12", "1.53e12"),
        ("0.5e-2", "5e-3"),
        # things that look like floating point
        ("0.001", "1e-3"),
        ("0.0005k", "0.5"),
        ("1.5", "1.5"),
        ("10.035M", "10035e3"),
        ("100.035k", "100035"),
        ("6.987654321G", "6987654321"),
        ("1.01E", "1.01e18"),
        # signs
        ("+2", "2"),
        ("-3.5", "-3.5"),
        # rounded up to a whole nano, as the API server stores them
        ("3.001n", "4e-9"),
        ("1.1E-9", "2e-9"),
        ("0.0000000001", "1e-9"),
        ("0.00000012345", "124e-9"),
        ("-0.5n", "-1e-9"),
        # binary quantities are capped at 2^63-1
        ("9Ei", INT64_MAX),
        ("9223372036854775807Ki", INT64_MAX),
        ("12E", "12e18"),  # a decimal one is not
        # fractional binary
        ("100.035Ki", "102435.84"),
        ("0.5Mi", 2**19),
        ("0.000000000001Ki", "2e-9"),
        # written by trolls, still quantities
        (".001", "1e-3"),
        (".0001k", "0.1"),
        ("1.", "1"),
        ("1.G", "1e9"),
        # the API server trims JSON whitespace
        (" 16Gi ", 16 * 2**30),
    ],
)
def test_parses_like_the_api_server(text: str, expected: str | int) -> None:
    assert parse_quantity(text) == Decimal(expected)


@pytest.mark.parametrize(
    "text",
    [
        # apimachinery's invalid table
        "1.1.M",
        "1+1.0M",
        "0.1mi",
        "0.1am",
        "aoeu",
        ".5i",
        "1i",
        "-3.01i",
        "-3.01e-",
        # more junk
        "",
        "+",
        ".",
        "1ki",
        "1KiB",
        "1K",
        "1e",
        "1e+",
        "1e1.5",
        "1e3k",
        "1 Gi",
        "1,5",
        "1_000",
        "0x10",
        "\uff11",  # a full-width digit
        "NaN",
        "Inf",
        "1e99999999999999999999",
        "1e" + "9" * 5000,
    ],
)
def test_rejects_junk_naming_it(text: str) -> None:
    with pytest.raises(QuantityError, match=f"^{re.escape(repr(text))} is not a Kubernetes quantity"):
        parse_quantity(text)


def test_the_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="'lots' is not a Kubernetes quantity"):
        parse_quantity("lots")


@pytest.mark.parametrize(
    ("text", "milli", "whole"),
    [
        ("2", 2000, 2),
        ("100m", 100, 1),
        ("1.5", 1500, 2),
        ("0.5m", 1, 1),  # MilliValue rounds up
        ("1n", 1, 1),
        ("16Gi", 16 * 2**30 * 1000, 16 * 2**30),
        ("1e3", 1_000_000, 1000),
        ("1e0", 1000, 1),
        ("0", 0, 0),
        ("-1.5", -1500, -1),  # up is towards +infinity, as ScaledValue's ceil
    ],
)
def test_milli_value_and_value_round_up(text: str, milli: int, whole: int) -> None:
    assert milli_value(text) == milli
    assert value(text) == whole


def test_integer_forms_refuse_what_does_not_fit_in_64_bits() -> None:
    assert value("9Ei") == INT64_MAX
    with pytest.raises(QuantityError, match="'12E' is not a Kubernetes quantity: it does not fit in 64 bits"):
        value("12E")
    with pytest.raises(QuantityError, match="64 bits"):
        milli_value("9223372036854775807")


def test_exact_beyond_28_digits() -> None:
    # The default decimal context rounds to 28 digits; quantities must not.
    assert parse_quantity("1234567890123456789012345678901k") == Decimal("1234567890123456789012345678901000")
