"""Byte counts in words."""

from onnxroof.units import binary_bytes, decimal_bytes


def test_binary_units_are_powers_of_1024():
    # 1536 = 1.5 * 1024; 3 * 2**20 is 3 MiB; 2**30 is 1 GiB
    assert [binary_bytes(n) for n in (512, 1536, 3 * 2**20, 2**30)] == ["512 B", "1.5 KiB", "3 MiB", "1 GiB"]


def test_decimal_units_are_powers_of_1000():
    # 1536 B is 1.536 kB, three digits: 1.54 kB; 2**30 B = 1.073741824 GB
    assert [decimal_bytes(n) for n in (999, 1536, 25e6, 2**30)] == ["999 B", "1.54 kB", "25 MB", "1.07 GB"]
