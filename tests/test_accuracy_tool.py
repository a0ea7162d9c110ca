"""The accuracy benchmark's reading of a model's rounds (tools/accuracy.py is a script, loaded from its file)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers import cuda_runs_here

_PATH = Path(__file__).resolve().parent.parent / "tools" / "accuracy.py"
_spec = importlib.util.spec_from_file_location("onnxroof_accuracy_tool", _PATH)
accuracy = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = accuracy  # its dataclasses look their module up there
_spec.loader.exec_module(accuracy)


def _row() -> object:
    # Three rounds of eight samples. Their medians (the mean of the 4th and 5th smallest): (14 + 15) / 2 = 14.5,
    # (15 + 16) / 2 = 15.5 and (14 + 15) / 2 = 14.5 ms; their fast estimates (the fastest eighth, one sample):
    # 10, 12 and 11 ms.
    rounds = [
        [0.010, 0.013, 0.015, 0.020, 0.011, 0.014, 0.016, 0.018],
        [0.012, 0.019, 0.013, 0.017, 0.015, 0.016, 0.014, 0.018],
        [0.011, 0.012, 0.030, 0.013, 0.014, 0.015, 0.016, 0.017],
    ]
    # The analysis classes kernels k0 and k1 as gemm, k2 as softmax, and has no node for k3.
    nodes = [SimpleNamespace(name=n, engine=SimpleNamespace(op_class=c)) for n, c in (("k0", "gemm"), ("k1", "gemm"))]
    nodes += [SimpleNamespace(name="k2", engine=SimpleNamespace(op_class="softmax"))]
    validation = SimpleNamespace(
        predicted_time_s=0.0116,
        machine_speed=0.95,
        agreement=SimpleNamespace(to_dict=lambda: {"count": 3}),
        analysis=SimpleNamespace(nodes=nodes),
    )
    # The machine ran at 0.9, 1.0 and 1.2 of its calibrated speed in the three rounds.
    row = accuracy.Row("zoo:test", "zoo:test", validation, rounds, [0.9, 1.0, 1.2])
    # The validation's profile and one per round; the second round's kernels summed lowest (3 ms).
    row.profiles = [_profile(0.005, 2.0), _profile(0.004, 1.5), _profile(0.003, 1.1), _profile(0.0045, 1.0)]
    return row


def _profile(kernel_sum_s: float, ratio: float) -> object:
    """A profile of four kernels of 1, 2, 3 and 4 ms, each predicted ``ratio`` times its measured time."""
    kernels = tuple(
        SimpleNamespace(
            predicted_time_s=ratio * m,
            measured_time_s=m,
            shape_only=False,
            engine_only=False,
            name=f"k{i}",
            op_type="MatMul",
        )
        for i, m in enumerate((0.001, 0.002, 0.003, 0.004))
    )
    return accuracy.Profile(kernel_sum_s, kernels, kernels)


def test_a_model_is_read_as_the_median_of_its_quietest_round():
    row = _row()
    assert row.round_medians == pytest.approx([0.0145, 0.0155, 0.0145])
    assert row.measured_s == pytest.approx(0.0145)
    # the fast estimates' median, beside it: 11 ms
    assert row.fast_s == pytest.approx(0.011)
    assert len(row.samples) == 24


def test_each_round_is_read_at_the_calibrated_speed_through_its_reference_reading():
    # Medians 14.5, 15.5, 14.5 ms at speeds 0.9, 1.0, 1.2: at the calibrated speed 13.05, 15.5 and 17.4 ms,
    # median 15.5 ms.
    row = _row()
    assert row.at_calibrated_speed_s == pytest.approx(0.0155)
    # A round without a reading (an uncalibrated device) leaves nothing to read at the calibrated speed.
    row.speeds[1] = None
    assert row.at_calibrated_speed_s is None


def test_the_json_row_carries_measured_latency_and_error():
    out = accuracy.row_dict(_row())
    assert out["model"] == "zoo:test"
    assert out["measured_time_s"] == pytest.approx(0.0145)
    assert out["predicted_time_s"] == 0.0116 and out["machine_speed"] == 0.95
    # 11.6 ms against the quietest round's median, 14.5 ms: (11.6 - 14.5) / 14.5 = -20%; at the calibrated
    # speed, against 15.5 ms: (11.6 - 15.5) / 15.5 = -25.16%.
    assert out["error"] == pytest.approx(-0.20)
    assert out["measured_at_calibrated_speed_s"] == pytest.approx(0.0155)
    assert out["error_at_calibrated_speed"] == pytest.approx((11.6 - 15.5) / 15.5)
    assert out["measured_fast_s"] == pytest.approx(0.011)
    assert out["round_speeds"] == [0.9, 1.0, 1.2]
    assert len(out["rounds_samples_s"]) == 3
    assert out["kernel_agreement_validation"] == {"count": 3}
    assert out["profile_kernel_sums_s"] == [0.005, 0.004, 0.003, 0.0045]


def test_the_kernels_are_read_on_the_quietest_profile():
    row = _row()
    # The profiles' kernel sums are 5, 4, 3 and 4.5 ms: the third (the second round's) is the quietest. Its
    # kernels were each predicted 1.1 times their measured time: every relative error is +10%, their median
    # absolute error 10%, and the ranks agree (Spearman 1).
    assert row.quietest_profile is row.profiles[2]
    stats = row.quietest_profile.agreement()
    assert stats.count == 4
    assert stats.median_abs_error == pytest.approx(0.10)
    assert stats.spearman == pytest.approx(1.0)
    assert accuracy.row_dict(row)["kernel_agreement"]["median_abs_error"] == pytest.approx(0.10)


def test_the_quietest_profile_is_summed_by_op_class():
    # The quietest profile's kernels of 1, 2, 3 and 4 ms, each predicted 1.1 times: gemm holds k0 and k1 (3 ms,
    # predicted 3.3), softmax k2 (3 ms, 3.3), and k3, which the analysis has no node for, goes by its op type
    # MatMul (4 ms, 4.4).
    times = _row().class_times()
    assert set(times) == {"gemm", "softmax", "MatMul"}
    assert times["gemm"] == pytest.approx((0.0033, 0.003))
    assert times["softmax"] == pytest.approx((0.0033, 0.003))
    assert times["MatMul"] == pytest.approx((0.0044, 0.004))
    assert accuracy.row_dict(_row())["class_times_s"]["MatMul"] == pytest.approx([0.0044, 0.004])


def test_each_model_weighs_alike_in_the_per_class_lines():
    models = [
        {"gemm": (2.0, 1.0), "softmax": (1.0, 1.0)},  # gemm half of this model's time, predicted 2x
        {"gemm": (300.0, 300.0)},  # a model 150 times longer, all gemm, predicted exactly
        {"gemm": (0.9, 1.0), "tiny": (0.01, 0.001)},  # tiny: 0.001 / 1.001 of this model, under 1% of the set's
    ]
    gemm, softmax = accuracy.class_lines(models)
    # gemm's share: (0.5 + 1 + 1 / 1.001) / 3 = 0.8330; its ratios 2, 1 and 0.9: median 1.
    assert (gemm.op_class, gemm.models) == ("gemm", 3)
    assert gemm.share == pytest.approx((0.5 + 1 + 1 / 1.001) / 3)
    assert gemm.median_ratio == pytest.approx(1.0)
    # softmax: half of one model's time of three, 1/6; one ratio, 1.
    assert (softmax.op_class, softmax.models) == ("softmax", 1)
    assert softmax.share == pytest.approx(1 / 6)
    assert softmax.median_ratio == pytest.approx(1.0)
    assert "in   1 model(s),  16.7% of a model's kernel time, predicted / profiled 1.00" in str(softmax)


def test_the_error_splits_into_the_kernels_and_what_a_run_adds_to_them():
    models = [
        (0.0105, {"gemm": (0.0095, 0.0100)}),  # kernels predicted 0.95 of profiled, its run 1.05 of its kernels
        (0.0220, {"gemm": (0.0100, 0.0100), "softmax": (0.0100, 0.0100)}),  # exact kernels; run 1.10
        (0.0030, {"conv": (0.0031, 0.0030)}),  # 1.0333; run 1.00
        (0.0050, {"tiny": (0.0010, 0.0)}),  # nothing profiled: left out
    ]
    split = accuracy.error_split(models)
    # Kernels: medians of (-5%, 0%, +3.33%) = 0%; runs: of (+5%, +10%, 0%) = +5%.
    assert split.kernels == pytest.approx(0.0, abs=1e-12)
    assert split.runs == pytest.approx(0.05)
    assert "kernels predicted over profiled +0.0%, a run over its profiled kernels +5.0%" in str(split)
    assert accuracy.error_split([(0.005, {"tiny": (0.001, 0.0)})]) is None


def _manifest(folder: Path) -> list[dict]:
    entries = [
        {
            "name": "gpt2",
            "family": "text-decoder",
            "exporter": "torchscript",
            "file": "gpt2.onnx",
            "inputs": [{"name": "input_ids", "shape": [1, 128], "dtype": "int64"}],
            "description": "GPT-2 small",
        },
        {
            "name": "gpt2-dynamo",
            "family": "text-decoder",
            "exporter": "dynamo",
            "file": "gpt2-dynamo.onnx",
            "inputs": [{"name": "input_ids", "shape": [1, 128], "dtype": "int64"}],
            "description": "GPT-2 small",
        },
    ]
    (folder / "manifest.json").write_text(json.dumps({"models": entries}))
    return entries


def test_the_benchmark_set_is_read_from_its_manifest(tmp_path):
    _manifest(tmp_path)
    manifest = accuracy.read_manifest(tmp_path)
    assert [e["name"] for e in manifest] == ["gpt2", "gpt2-dynamo"]
    # The whole set, as bench:NAME labels naming the files in the folder.
    sources = accuracy.model_sources(None, manifest=manifest, folder=tmp_path, which="benchmark")
    assert sources == [
        ("bench:gpt2", str(tmp_path / "gpt2.onnx")),
        ("bench:gpt2-dynamo", str(tmp_path / "gpt2-dynamo.onnx")),
    ]
    # Picked by name among zoo models; the default set is the zoo and light models alone.
    picked = accuracy.model_sources("zoo:resnet18,bench:gpt2-dynamo", manifest=manifest, folder=tmp_path)
    assert picked == [("zoo:resnet18", "zoo:resnet18"), ("bench:gpt2-dynamo", str(tmp_path / "gpt2-dynamo.onnx"))]
    default = accuracy.model_sources(None, zoo=("resnet18",), light=(), manifest=manifest, folder=tmp_path)
    assert default == [("zoo:resnet18", "zoo:resnet18")]
    assert len(accuracy.model_sources(None, zoo=("resnet18",), light=(), manifest=manifest, which="all")) == 3
    with pytest.raises(SystemExit, match="not in the benchmark set"):
        accuracy.model_sources("bench:bert", manifest=manifest, folder=tmp_path)


def test_a_manifest_entry_without_the_keys_the_tools_read_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="no benchmark set"):
        accuracy.read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"models": [{"name": "x", "family": "mlp"}]}))
    with pytest.raises(SystemExit, match="'x' lacks exporter, file, inputs"):
        accuracy.read_manifest(tmp_path)


def test_every_model_has_a_family(tmp_path):
    manifest = _manifest(tmp_path)
    assert accuracy.family_of("bench:gpt2", manifest) == "text-decoder"
    assert accuracy.family_of("zoo:resnet18") == "resnet"
    assert accuracy.family_of("light:squeezenet") == "mobile-cnn"
    assert accuracy.family_of("zoo:somethingelse") == "other"
    # Every model of the default set has one of its own.
    assert all(f"zoo:{n}" in accuracy.FAMILIES for n in accuracy.ZOO)
    assert all(f"light:{n}" in accuracy.FAMILIES for n in accuracy.LIGHT)


def test_one_line_per_family_with_its_models_within_10_percent_and_mean_error():
    records = [
        ("resnet", 0.05, 0.10),
        ("text-encoder", -0.13, 0.30),
        ("resnet", -0.01, 0.20),
        ("text-encoder", -0.09, None),
        ("resnet", 0.20, 0.12),
    ]
    lines = accuracy.family_lines(records)
    assert [line.family for line in lines] == ["resnet", "text-encoder"]  # in order of first appearance
    resnet, text = lines
    # resnet: errors +5%, -1%, +20%: two within 10%, mean +8%; per-kernel medians 10%, 20%, 12%: median 12%.
    assert (resnet.models, resnet.within) == (3, 2)
    assert resnet.mean_error == pytest.approx(0.08)
    assert resnet.kernel_median == pytest.approx(0.12)
    # text-encoder: -13% and -9%: one within, mean -11%; the one per-kernel figure there is, 30%.
    assert (text.models, text.within) == (2, 1)
    assert text.mean_error == pytest.approx(-0.11)
    assert text.kernel_median == pytest.approx(0.30)
    assert "2 model(s),   1 within 10%, mean error  -11.0%, per-kernel median |error| 30.0%" in str(text)


def test_a_rounds_loop_lasts_its_runs_and_its_seconds_whichever_is_longer():
    # A run of 1/1024 s: one second holds 1024 of them, more than the 32 asked for.
    assert accuracy.loop_runs(1 / 1024, 32, 1.0) == 1024
    # A run of 1/8 s: one second holds 8, so the 32 runs asked for set the loop.
    assert accuracy.loop_runs(0.125, 32, 1.0) == 32
    # A run that lasted nothing measurable: the runs asked for.
    assert accuracy.loop_runs(0.0, 32, 1.0) == 32


@pytest.mark.ort
@pytest.mark.skipif(cuda_runs_here(), reason="a GPU is here: --provider cuda would calibrate and time it")
def test_the_cuda_provider_without_a_gpu_is_one_line_and_exit_2(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("ONNXROOF_CACHE_DIR", str(tmp_path))  # no cached profile: it calibrates, and cannot
    assert accuracy.main(["--provider", "cuda", "--models", "zoo:resnet18", "--threads", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot calibrate CUDAExecutionProvider" in err[0]


def test_the_small_models_are_built_with_their_families(monkeypatch, tmp_path):
    monkeypatch.setenv("ONNXROOF_CACHE_DIR", str(tmp_path))
    spec = importlib.util.spec_from_file_location("onnxroof_small_models", _PATH.with_name("small_models.py"))
    small = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(small)
    assert tuple(small.MODELS) == accuracy.SMALL
    assert all(accuracy.FAMILIES[f"light:{name}"] == family for name, (_, family) in small.MODELS.items())
    sources = dict(accuracy.model_sources("light:vad_lstm,light:tiny_cnn"))
    assert sources == {
        "light:vad_lstm": str(tmp_path / "small-models" / "vad_lstm.onnx"),
        "light:tiny_cnn": str(tmp_path / "small-models" / "tiny_cnn.onnx"),
    }
    import onnx

    model = onnx.load(sources["light:vad_lstm"])
    (rate,) = [n for n in model.graph.node if n.op_type == "If"]
    # each branch: its convolutional front end and an LSTM with the state input's slices as its initial state
    for branch in (a.g for a in rate.attribute):
        assert [n.op_type for n in branch.node].count("LSTM") == 1
    assert [i.name for i in model.graph.input] == ["x", "state", "sr"]
