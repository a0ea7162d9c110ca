"""The generation figure: its numbers derived by hand from a hand-made prediction (round step figures, the
catalog's datasheet roofs), the drawing's lines and points counted on its axes, and its file written as the other
figures' are."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from onnxroof.devices.resolve import resolve_device
from onnxroof.errors import UserError
from onnxroof.load.decoder import DecoderDims
from onnxroof.report.figures.decoder_data import (
    DecoderOnDevice,
    decode_line,
    decoder_data,
    line_contexts,
)
from onnxroof.report.figures.decoder_drawing import draw_decoder, write_decoder_figure
from onnxroof.report.figures.plane_data import DRAM
from onnxroof.whatif.decoder import DecoderMemory, DecoderPrediction, MeasuredGeneration, Step

SVG = "{http://www.w3.org/2000/svg}"

# A prompt of 50 tokens and 801 generated: decode contexts 50 .. 850, three of them analyzed (50, 450, 850).
PROMPT, GENERATE = 50, 801
PREFILL = Step(context=0, new_tokens=50, time_s=0.05, bound="compute", flops=2e12, bytes=1e10)
DECODE = (
    Step(context=50, new_tokens=1, time_s=0.002, bound="memory", flops=2e10, bytes=2e9),
    Step(context=450, new_tokens=1, time_s=0.003, bound="memory", flops=2.1e10, bytes=3e9),
    Step(context=850, new_tokens=1, time_s=0.004, bound="memory", flops=2.2e10, bytes=4e9),
)


def prediction(device: str = "v100-sxm2", measured: MeasuredGeneration | None = None) -> DecoderPrediction:
    return DecoderPrediction(
        model="tiny-llm",
        device=device,
        engine=None,
        batch=1,
        prompt=PROMPT,
        generate=GENERATE,
        dims=DecoderDims("batch", "sequence", "past", "total", ("past.key",), ("present.key",), "GroupQueryAttention"),
        shared_buffer=False,
        prefill=PREFILL,
        decode=DECODE,
        exact=False,
        decode_mean_s=0.003,  # 2 ms rising linearly to 4 ms over evenly spaced steps: their mean is 3 ms
        memory=DecoderMemory(
            weights_bytes=1_000_000_000, kv_bytes_per_token=1000, kv_cache_bytes=851_000, activation_bytes=1_000_000
        ),
        includes="kernels",
        measured=measured,
    )


@pytest.fixture(scope="module")
def v100():
    return resolve_device("v100-sxm2")


@pytest.fixture(scope="module")
def t4():
    return resolve_device("t4")


def test_the_decode_line_is_ms_per_token_interpolated_between_the_analyzed_steps(v100):
    (series,) = decoder_data([DecoderOnDevice(prediction(), v100, "fp16")]).series
    line = {p.context: p for p in series.decode}
    # every context P .. P+G-1 = 50 .. 850 (801 <= LINE_POINTS); ms per token = 1000 * time_s at the analyzed ones
    assert [p.context for p in series.decode] == list(range(50, 851))
    assert [(c, line[c].ms_per_token) for c in (50, 450, 850)] == [(50, 2.0), (450, 3.0), (850, 4.0)]
    # 250 is halfway from 50 (2 ms) to 450 (3 ms): 2.5 ms; 650 halfway from 450 to 850 (4 ms): 3.5 ms
    assert line[250].ms_per_token == pytest.approx(2.5)
    assert line[650].ms_per_token == pytest.approx(3.5)
    assert [p.context for p in series.decode if p.analyzed] == [50, 450, 850]
    assert series.analyzed_indices == [0, 400, 800]  # a context's index is the context less the first, 50
    # TTFT = 1000 * 0.05 s; tokens/s = batch / mean step = 1 / 0.003 s
    assert series.ttft_ms == pytest.approx(50.0)
    assert series.decode_mean_ms == pytest.approx(3.0)
    assert series.tokens_per_s == pytest.approx(1 / 0.003)


def test_each_phase_sits_at_its_intensity_and_attained_rate(v100):
    (series,) = decoder_data([DecoderOnDevice(prediction(), v100, "fp16")]).series
    phases = {ph.phase: ph for ph in series.phases}
    assert list(phases) == ["prefill", "decode first", "decode last"]
    # intensity = flops / bytes, FLOP/s = flops / time_s
    assert phases["prefill"].intensity == pytest.approx(2e12 / 1e10)  # 200 FLOP/B
    assert phases["prefill"].flops_s == pytest.approx(2e12 / 0.05)  # 40 TFLOP/s
    assert phases["decode first"].intensity == pytest.approx(2e10 / 2e9)  # 10 FLOP/B
    assert phases["decode first"].flops_s == pytest.approx(2e10 / 0.002)  # 10 TFLOP/s
    assert phases["decode last"].intensity == pytest.approx(2.2e10 / 4e9)  # 5.5 FLOP/B
    assert phases["decode last"].flops_s == pytest.approx(2.2e10 / 0.004)  # 5.5 TFLOP/s
    assert phases["decode last"].context == 850


def test_the_roof_is_the_devices_peak_at_the_precision_used_under_its_bandwidth(v100):
    data = decoder_data([DecoderOnDevice(prediction(), v100, "fp16")])
    (roof,) = data.roofs
    assert (roof.device, roof.level, roof.precision, roof.primary) == ("v100-sxm2", DRAM, "fp16", True)
    assert roof.peak_flops_s == v100.peak_flops["fp16"].value == 125e12
    assert roof.bandwidth_bytes_s == v100.memory_bandwidth.value == 900e9
    # bf16 is not listed on the V100: its peak falls back to fp16's (Device.peak)
    (fallback,) = decoder_data([DecoderOnDevice(prediction(), v100, "bf16")]).roofs
    assert fallback.precision == "fp16" and fallback.peak_flops_s == 125e12
    # the log axes hold every phase and the ridge point, 125e12 / 900e9 = 139 FLOP/B, and the peak
    low, high = data.x_limits
    assert low < 5.5 and high > 200 and low < roof.ridge_point < high
    assert data.y_limits[0] < 5.5e12 and data.y_limits[1] > 125e12


def test_without_a_precision_every_listed_precision_has_a_roof(v100):
    data = decoder_data([DecoderOnDevice(prediction(), v100)])
    assert [r.precision for r in data.roofs] == ["fp64", "fp32", "fp16", "int8"]
    assert not any(r.primary for r in data.roofs)


def test_a_model_split_over_gpus_is_drawn_under_their_roofs_together(v100):
    split = dataclasses.replace(prediction(), tensor_parallel=4)
    data = decoder_data([DecoderOnDevice(split, v100, "fp16")])
    (roof,) = data.roofs
    # the whole model's FLOPs over one GPU's time: the 4 GPUs' rate, under 4 x 125 TFLOP/s and 4 x 900 GB/s
    assert roof.peak_flops_s == 4 * 125e12 and roof.bandwidth_bytes_s == 4 * 900e9
    assert roof.ridge_point == pytest.approx(125e12 / 900e9)
    assert roof.device == data.series[0].device == "4 x v100-sxm2"
    assert data.series[0].phases[0].flops_s == pytest.approx(2e12 / 0.05)


def test_the_scales_are_logarithmic_where_the_values_span_more_than_ten_times(v100):
    data = decoder_data([DecoderOnDevice(prediction(), v100, "fp16")])
    assert data.log_context  # 850 / 50 = 17
    assert not data.log_time  # 4 / 2 = 2
    steps = (dataclasses.replace(DECODE[0], context=500), dataclasses.replace(DECODE[2], context=850))
    short = dataclasses.replace(prediction(), prompt=500, generate=351, decode=steps)  # contexts 500 .. 850
    assert not decoder_data([DecoderOnDevice(short, v100, "fp16")]).log_context  # 850 / 500 = 1.7


def test_a_long_generation_is_drawn_through_fewer_points_keeping_the_analyzed(v100):
    contexts = line_contexts(prediction(), limit=5)
    # np.linspace(50, 850, 5) = 50, 250, 450, 650, 850: the analyzed ones among them
    assert contexts == [50, 250, 450, 650, 850]
    line = decode_line(prediction(), limit=5)
    assert [p.ms_per_token for p in line] == pytest.approx([2.0, 2.5, 3.0, 3.5, 4.0])
    assert [p.analyzed for p in line] == [True, False, True, False, True]


def test_a_prediction_with_another_devices_object_is_refused(v100):
    with pytest.raises(ValueError, match="t4"):
        decoder_data([DecoderOnDevice(prediction("t4"), v100)])
    with pytest.raises(ValueError, match="at least one"):
        decoder_data([])


def test_the_figure_has_a_line_per_device_and_the_phases_on_the_roofline(v100, t4):
    runs = [DecoderOnDevice(prediction(), v100, "fp16"), DecoderOnDevice(prediction("t4"), t4, "fp16")]
    drawn = draw_decoder(decoder_data(runs))
    left, right = drawn.figure.axes[:2]
    assert len(left.lines) == 2  # one per device
    assert [line.get_markevery() for line in left.lines] == [[0, 400, 800]] * 2
    labels = [t.get_text() for t in left.get_legend().get_texts()]
    assert labels[0].startswith("v100-sxm2: TTFT 50.0 ms, 333.3 tokens/s")
    assert left.get_xscale() == "log" and left.get_yscale() == "linear"
    # per device: its roof and its ridge's tick (2 lines), its prefill point and its decode points (2 lines)
    assert len(right.lines) == 2 * 2 + 2 * 2
    assert right.get_xscale() == right.get_yscale() == "log"
    prefill, decode = right.lines[4], right.lines[5]
    assert list(prefill.get_xdata()) == pytest.approx([200.0]) and list(prefill.get_ydata()) == pytest.approx([4e13])
    assert list(decode.get_xdata()) == pytest.approx([10.0, 5.5])
    assert list(decode.get_ydata()) == pytest.approx([1e13, 5.5e12])
    texts = {t.get_text() for t in right.texts}
    assert {"prefill (50 tokens)", "decode, cache 50", "decode, cache 850"} <= texts
    assert "tiny-llm" in drawn.title and "v100-sxm2, t4" in drawn.title


def test_a_setting_the_devices_do_not_share_is_given_per_line(v100, t4):
    runs = [DecoderOnDevice(prediction(), v100, "fp16"), DecoderOnDevice(prediction("t4"), t4, "fp16")]
    assert decoder_data(runs).title.endswith(": prompt 50, 801 generated, batch 1")
    runs[1] = DecoderOnDevice(dataclasses.replace(prediction("t4"), batch=4), t4, "fp16")
    data = decoder_data(runs)
    assert not data.shared_setting and data.title == "Generation of tiny-llm on v100-sxm2, t4"
    labels = [t.get_text() for t in draw_decoder(data).figure.axes[0].get_legend().get_texts()]
    assert labels[1].startswith("t4 (prompt 50, 801 generated, batch 4): TTFT 50.0 ms")


def test_a_measured_generation_adds_a_dashed_line(v100):
    measured = MeasuredGeneration(1, 1, 0.06, ((50, 0.0021), (450, 0.0031), (850, 0.0041)), 0.0031)
    data = decoder_data([DecoderOnDevice(prediction(measured=measured), v100, "fp16")])
    assert data.series[0].measured_ttft_ms == pytest.approx(60.0)
    assert [c for c, _ in data.series[0].measured] == [50, 450, 850]
    assert [ms for _, ms in data.series[0].measured] == pytest.approx([2.1, 3.1, 4.1])  # 1000 * seconds
    left = draw_decoder(data).figure.axes[0]
    assert len(left.lines) == 2 and left.lines[1].get_linestyle() == "--"


def test_the_figure_is_written_as_svg_and_replaced_only_with_force(v100, tmp_path: Path):
    runs = [DecoderOnDevice(prediction(), v100, "fp16")]
    path = tmp_path / "generation.svg"
    write_decoder_figure(runs, path, force=False)
    assert ET.fromstring(path.read_bytes()).tag == SVG + "svg"
    path.write_bytes(b"old")
    with pytest.raises(UserError, match="exists"):
        write_decoder_figure(runs, path, force=False)
    assert path.read_bytes() == b"old"
    write_decoder_figure(runs, path, force=True)
    assert ET.fromstring(path.read_bytes()).tag == SVG + "svg"
    assert [p.name for p in tmp_path.iterdir()] == ["generation.svg"]  # no temporary file left behind


def test_the_figure_file_must_name_a_format_and_not_a_folder(v100, tmp_path: Path):
    runs = [DecoderOnDevice(prediction(), v100, "fp16")]
    with pytest.raises(UserError, match="names no figure format"):
        write_decoder_figure(runs, tmp_path / "generation.txt", force=True)
    folder = tmp_path / "out.svg"
    folder.mkdir()
    with pytest.raises(UserError, match="is a folder"):
        write_decoder_figure(runs, folder, force=True)
