"""The renderers' shared formatting: engineering units, names cut in the middle, prose wrapped, tables laid out to
a width. Every expected string is written out by hand from the convention in onnxroof/report/format.py."""

from __future__ import annotations

import re

import pytest

from onnxroof.report.format import ELLIPSIS, Column, dims, middle, seconds, si, table, wrap


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (13510, "", "13.5 k"),  # 1.351e4: three significant digits under k
        (999.6, "", "1.00 k"),  # rounds to 1.00e3 before the prefix is chosen, so never "1e+03"
        (999.4, "", "999"),  # rounds to 9.99e2: no prefix, no decimals left
        (231211008, "FLOP", "231 MFLOP"),  # 2*64*56*56*64*3*3, ResNet's 3x3 conv
        (15.7e12, "FLOP/s", "15.7 TFLOP/s"),
        (900e9, "B/s", "900 GB/s"),
        (4096, "", "4.10 k"),  # 4.096e3 to three digits
        (16, "FLOP", "16 FLOP"),  # a whole count under 1000 is written whole
        (12.5, "FLOP/B", "12.5 FLOP/B"),
        (0.0227, "", "0.0227"),  # below every prefix: three significant digits all the same
        (0, "B", "0 B"),
        (-4096, "", "-4.10 k"),
    ],
)
def test_si_keeps_three_significant_digits_under_the_prefix_of_the_value(value: float, unit: str, text: str) -> None:
    assert si(value, unit) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1000e-6, "1.00 ms"),  # 1000 us is a millisecond
        (999.6e-6, "1.00 ms"),  # rounds to 1.00e-3 first: never "1e+03 us"
        (4.2e-6, "4.20 us"),  # V100's launch overhead
        (1.09e-3, "1.09 ms"),
        (523e-6, "523 us"),
        (2e-10, "0.200 ns"),  # under a nanosecond: still in ns, three digits
        (60, "60.0 s"),
        (1500, "1500 s"),  # past the largest unit: whole seconds
        (0, "0 s"),
    ],
)
def test_seconds_reads_in_ns_us_ms_or_s_with_three_significant_digits(value: float, text: str) -> None:
    assert seconds(value) == text


def test_no_number_is_written_with_an_exponent() -> None:
    values = [m * 10.0**k for k in range(-12, 19) for m in (1.0, 1.351, 9.994, 9.996)]
    written = [si(v) for v in values if v >= 1] + [seconds(v) for v in values if v < 1e3]
    assert not [w for w in written if re.search(r"\de[+-]", w)]


def test_dims_writes_a_shape_as_a_table_cell() -> None:
    assert (dims((1, 64, 56, 56)), dims(()), dims(None)) == ("1x64x56x56", "scalar", "?")


def test_a_name_cut_in_the_middle_keeps_its_start_and_end() -> None:
    conv1, conv2 = "/encoder/layer1/layer1.0/conv1/Conv", "/encoder/layer1/layer1.0/conv2/Conv"
    # 35 characters in 26: 25 kept around the ellipsis, a third (8) from the start and the rest (17) from the end.
    assert middle(conv1, 26) == "/encoder" + ELLIPSIS + "yer1.0/conv1/Conv"
    assert middle(conv2, 26) == "/encoder" + ELLIPSIS + "yer1.0/conv2/Conv"
    assert len(middle(conv1, 26)) == 26 and middle(conv1, 26) != middle(conv2, 26)
    assert middle(conv1, 35) == conv1  # whole where it fits


def test_prose_wraps_within_the_width_and_keeps_every_word() -> None:
    text = "  saved as /home/user/.cache/onnxroof/host-cpu-1.31.1-threads1.toml: '--device host' uses it"
    lines = wrap(text, 40)
    assert len(lines) > 1 and lines[0].startswith("  saved as")
    assert all(line.startswith("    ") for line in lines[1:])  # continuations: two more spaces
    assert " ".join(line.strip() for line in lines) == text.strip()  # nothing cut
    assert "/home/user/.cache/onnxroof/host-cpu-1.31.1-threads1.toml:" in lines[1].strip()  # a path stays whole
    assert wrap(text, None) == [text]


COLUMNS = (Column("node", cut=True), Column("FLOPs", right=True), Column("why", wrap=True))
ROWS = [
    ["/encoder/layer1/layer1.0/conv1/Conv", "231 M", "plain roofline of the exported node"],
    ["/encoder/layer1/layer1.0/conv2/Conv", "1.20 k", "plain roofline"],
]


def test_a_table_without_a_width_keeps_every_cell_whole() -> None:
    lines = table(COLUMNS, ROWS, None)
    # node 35 wide, FLOPs 6 (its header 5, "1.20 k" 6), why 35: one space between columns, so the header is
    # "node", 31 spaces of padding, the gap, and "FLOPs" right-aligned in 6.
    assert lines[0] == "node" + " " * 33 + "FLOPs why"
    assert lines[1] == "/encoder/layer1/layer1.0/conv1/Conv  231 M plain roofline of the exported node"
    assert lines[2] == "/encoder/layer1/layer1.0/conv2/Conv 1.20 k plain roofline"


def test_a_narrow_table_wraps_its_prose_then_cuts_names_in_the_middle() -> None:
    # 35 + 1 + 6 + 1 + 35 = 78 natural; at 70 the prose column gives 8 (35 -> 27) and no name is cut.
    lines = table(COLUMNS, ROWS, 70)
    assert max(map(len, lines)) <= 70 and ROWS[0][0] in lines[1]
    assert lines[2].strip() == "exported node"  # the prose continues under its column
    assert lines[2].startswith(" " * 43)
    # At 60 the prose stops at its floor (24) and the names give the other 7: 35 -> 28, cut in the middle.
    lines = table(COLUMNS, ROWS, 60)
    assert max(map(len, lines)) <= 60
    assert lines[0].startswith("node") and "FLOPs" in lines[0] and "why" in lines[0]  # headers whole
    assert len(lines) == 4  # the header, the first row and its prose's continuation, the second row
    assert lines[1][:28] == middle(ROWS[0][0], 28) and lines[3][:28] == middle(ROWS[1][0], 28)
    assert lines[1][:28] != lines[3][:28]
    assert " ".join(line[36:].strip() for line in lines[1:3]).strip() == ROWS[0][2]  # the prose is all there


def test_a_number_stays_on_the_line_of_its_unit() -> None:
    # 18 characters fit "  compute 0.0326" (16) but not its unit (19): the number moves down with it.
    assert wrap("  compute 0.0326 ns, memory 25.0 ns", 18) == ["  compute", "    0.0326 ns,", "    memory 25.0 ns"]


def test_an_optional_column_is_left_out_only_when_nothing_else_fits() -> None:
    columns = (Column("node", cut=True), Column("FLOPs", right=True), Column("FLOP/B", right=True, optional=True))
    rows = [["a_node_name_of_twenty", "231 M", "132"]]
    # Natural: 21 + 1 + 5 + 1 + 6 = 34. At 30 the name gives 4 (21 -> 17) and every column stays.
    assert table(columns, rows, 30)[0].split() == ["node", "FLOPs", "FLOP/B"]
    # At 20 the name stops at its floor (12): 12 + 1 + 5 + 1 + 6 = 25 > 20, so FLOP/B goes and the name has 14.
    lines = table(columns, rows, 20)
    assert lines[0].split() == ["node", "FLOPs"] and lines[1] == middle(rows[0][0], 14) + " 231 M"
