"""Byte counts in words, amounts written with their units, and sizes as Linux writes them."""

import pytest

from onnxroof.errors import UserError
from onnxroof.units import Amount, binary_bytes, decimal_bytes, in_unit, kernel_bytes, parse_bytes, parse_seconds


def test_binary_units_are_powers_of_1024():
    # 1536 = 1.5 * 1024; 3 * 2**20 is 3 MiB; 2**30 is 1 GiB
    assert [binary_bytes(n) for n in (512, 1536, 3 * 2**20, 2**30)] == ["512 B", "1.5 KiB", "3 MiB", "1 GiB"]


def test_decimal_units_are_powers_of_1000():
    # 1536 B is 1.536 kB, three digits: 1.54 kB; 2**30 B = 1.073741824 GB
    assert [decimal_bytes(n) for n in (999, 1536, 25e6, 2**30)] == ["999 B", "1.54 kB", "25 MB", "1.07 GB"]


@pytest.mark.parametrize(
    ("text", "value", "unit"),
    [
        ("10ms", 0.01, "ms"),  # 10 * 1e-3
        ("2.5s", 2.5, "s"),
        ("500us", 500e-6, "us"),  # 500 * 1e-6
        ("500\u00b5s", 500e-6, "us"),  # with the micro sign
        ("10 ms", 0.01, "ms"),
        ("3ns", 3e-9, "ns"),
    ],
)
def test_durations_keep_their_unit(text: str, value: float, unit: str):
    amount = parse_seconds(text)
    assert amount.value == pytest.approx(value) and amount.unit == unit


@pytest.mark.parametrize(
    ("text", "value", "unit"),
    [
        ("4GiB", 4 * 2**30, "GiB"),  # 4 * 2**30 = 4294967296
        ("4GB", 4 * 10**9, "GB"),  # 4000000000
        ("512MiB", 512 * 2**20, "MiB"),  # 536870912
        ("512mb", 512 * 10**6, "MB"),  # any case
        ("1.5KiB", 1536, "KiB"),  # 1.5 * 1024
        ("100B", 100, "B"),
        ("2TiB", 2 * 2**40, "TiB"),  # 2199023255552
    ],
)
def test_byte_counts_keep_their_unit(text: str, value: int, unit: str):
    assert parse_bytes(text) == Amount(value, unit)


def test_an_amount_is_shown_in_the_unit_it_was_written_in():
    assert str(parse_bytes("4GiB")) == "4 GiB"  # not 4.29 GB
    assert str(parse_seconds("10ms")) == "10 ms"
    # 4.2e9 B / 2**30 = 3.9116... GiB, four digits; 0.0125 s = 12.5 ms
    assert in_unit(4.2e9, "GiB") == "3.912 GiB" and in_unit(0.0125, "ms") == "12.5 ms"


@pytest.mark.parametrize("text", ["10", "0.5", "1e3"])
def test_a_bare_number_is_refused_with_the_units_in_the_hint(text: str):
    with pytest.raises(UserError, match="has no unit") as seconds:
        parse_seconds(text)
    assert f"{text}ms" in str(seconds.value.hint) and f"{text}s" in str(seconds.value.hint)
    with pytest.raises(UserError, match="has no unit") as nbytes:
        parse_bytes(text)
    assert f"{text}GiB" in str(nbytes.value.hint) and f"{text}GB" in str(nbytes.value.hint)


@pytest.mark.parametrize(
    ("text", "gb", "gib"), [("4G", "4GB", "4GiB"), ("512m", "512MB", "512MiB"), ("8k", "8kB", "8KiB")]
)
def test_a_prefix_without_its_power_is_refused_naming_both(text: str, gb: str, gib: str):
    with pytest.raises(UserError, match="is ambiguous") as refused:
        parse_bytes(text)
    assert gb in str(refused.value.hint) and gib in str(refused.value.hint)


@pytest.mark.parametrize("text", ["", "fast", "-1ms", "0s", "10 parsecs", "ms"])
def test_a_duration_that_does_not_parse_is_a_user_error(text: str):
    with pytest.raises(UserError, match="is not a latency budget"):
        parse_seconds(text)


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [
        ("48K", 48 * 1024),  # sysfs cache size: K is 1024
        ("2048K\n", 2 * 1024 * 1024),  # as read from the file, newline and all
        ("300M", 300 * 1024 * 1024),
        ("1.5 MiB", 3 * 2**19),  # lscpu: 1.5 * 2**20
        ("  1234 kB", 1234 * 1024),  # /proc's kB is KiB
        ("2G", 2 * 2**30),
        ("512", 512),  # a bare number is bytes
    ],
)
def test_kernel_sizes_are_powers_of_1024(text: str, nbytes: int):
    assert kernel_bytes(text) == nbytes


@pytest.mark.parametrize("text", ["weird", "", "4T", "-1K", "1 2 K"])
def test_what_is_no_kernel_size_reads_as_none(text: str):
    assert kernel_bytes(text) is None
