"""What every figure shares: op-type colours that stay put, marker sizes by time share, log axes' limits, and the
order a sweep's trajectory follows."""

from __future__ import annotations

import pytest

from onnxroof.report.figures.style import (
    FIXED_COLOURS,
    MAX_MARKER_AREA,
    MIN_MARKER_AREA,
    PALETTE,
    log_limits,
    marker_area,
    marker_radius,
    op_colour,
    short_name,
)
from onnxroof.report.figures.sweep_data import roof_precision, sweep_data
from onnxroof.report.format import seconds, si
from onnxroof.whatif.sweep import Sweep, SweepRow


def test_common_op_types_have_distinct_fixed_colours_and_others_a_stable_one():
    assert len(set(FIXED_COLOURS.values())) == len(FIXED_COLOURS)
    assert op_colour("Conv") == FIXED_COLOURS["Conv"] != op_colour("MatMul")
    assert op_colour("MyCustomOp") == op_colour("MyCustomOp") and op_colour("MyCustomOp") in PALETTE


def test_a_points_area_grows_linearly_with_its_share_of_time():
    assert marker_area(0.0) == MIN_MARKER_AREA and marker_area(1.0) == MAX_MARKER_AREA
    assert marker_area(0.5) == pytest.approx((MIN_MARKER_AREA + MAX_MARKER_AREA) / 2)
    assert marker_area(2.0) == MAX_MARKER_AREA and marker_area(-1.0) == MIN_MARKER_AREA  # clipped
    assert marker_radius(100.0) == 5.0  # a circle of 100 pt^2 (matplotlib's size) is 10 pt across


def test_log_limits_cover_the_values_by_whole_decades():
    # 0.03 / 2 = 0.015 -> 0.01; 700 * 2 = 1400 -> 1e4; zero and negatives have no place on a log axis
    assert log_limits([0.03, 700.0, 0.0, -5.0]) == (0.01, 1e4)
    assert log_limits([]) == (1.0, 10.0)


def test_numbers_read_with_their_units():
    assert si(15.7e12, "FLOP/s") == "15.7 TFLOP/s"
    assert si(900e9, "B/s") == "900 GB/s"
    assert seconds(4.2e-6) == "4.20 us" and seconds(1.09e-3) == "1.09 ms" and seconds(2e-10) == "0.200 ns"


def test_a_sweep_over_input_sizes_orders_its_points_by_pixel_count():
    def row(size: str, precision: str) -> SweepRow:
        h, w = (int(v) for v in size.split("x"))
        return SweepRow(
            1, size, precision, "what-if", "v100-sxm2", "as-exported", 1e-3, h * w * 1e6, h * w * 1e5, 10.0, "memory"
        )

    rows = tuple(row(s, p) for s in ("192x192", "64x64", "128x128") for p in ("fp32", "fp16"))
    data = sweep_data(Sweep("net", rows))
    assert data.axis == "input_size" and not data.roofs  # no devices given: trajectories without roofs
    assert [t.name for t in data.trajectories] == ["batch 1, fp32", "batch 1, fp16"]
    assert [p.label for p in data.trajectories[0].points] == ["64x64", "128x128", "192x192"]


def test_a_sweep_rows_precision_picks_the_roof_it_computes_under():
    assert roof_precision("fp16") == "fp16" and roof_precision("bf16") == "bf16"
    assert roof_precision("int8-dynamic") == roof_precision("int8-static") == "int8"
    assert roof_precision("stored") == "fp32"


def test_a_long_layer_name_is_written_by_its_end():
    # 43 characters, over the 28 a label keeps: the ellipsis and the last 27 characters, 28 in all.
    name = "encoder.layers.encoder_layer_1.mlp.3.matmul"
    assert short_name(name) == "\u2026" + "encoder_layer_1.mlp.3.matmul"[1:]
    assert len(short_name(name)) == 28
    assert short_name("layer4.1.conv2") == "layer4.1.conv2"  # short names stay whole
