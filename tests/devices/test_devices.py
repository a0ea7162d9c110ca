"""The device catalog: every number sourced and plausible, the papers' ridge points, fallback chains, user files."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from onnxroof.devices import (
    FALLBACK,
    PRECISIONS,
    CacheLevel,
    Sourced,
    WeightReuse,
    WeightWait,
    catalog,
    device_from_dict,
    limit_violations,
    load_device,
)
from onnxroof.errors import UserError

REQUIRED_KEYS = (
    "mx230",
    "gtx940mx",
    "rtx2060-super",
    "v100-sxm2",
    "t4",
    "l4",
    "a100-sxm4-80gb",
    "a100-pcie-40gb",
    "h100-sxm",
    "h100-pcie",
    "h200",
    "tpu-v4",
    "tpu7x",
    "grace-cpu",
    "colab-xeon-1core",
    "rtx3090",
    "rtx4090",
    "rtx5090",
    "a10",
    "l40s",
    "a100-sxm4-40gb",
    "v100-pcie",
    "h100-nvl",
    "b200",
    "mi300x",
    "jetson-agx-orin",
    "jetson-orin-nano",
    "apple-m3-max",
    "apple-m4",
    "raspberry-pi-5",
    "xeon-8480",
    "epyc-9654",
    "graviton4",
)

MINIMAL_DEVICE = """\
name = "Test GPU"
kind = "gpu"
overlap = "max"

[peak_flops.fp32]
value = 10e12
dense = true
source = "test datasheet: 10 TFLOPS FP32"

[peak_flops.fp16]
value = 80e12
sparse_value = 160e12
dense = true
source = "test datasheet: 160 TFLOPS FP16 with sparsity; dense = 160 / 2"

[memory_bandwidth]
value = 500e9
source = "test datasheet: 500 GB/s"

[memory_capacity]
value = 16e9
source = "test datasheet: 16 GB"

[launch_overhead]
value = 5e-6
source = "assumption for the test"

[[caches]]
level = "L2"
size = 4194304
scope = "shared"
source = "test datasheet: 4 MB L2"
"""


# ------------------------------------------------------------------------------------------------ the catalog


def test_required_devices_exist():
    devices = catalog()
    missing = [key for key in REQUIRED_KEYS if key not in devices]
    assert not missing
    for key, device in devices.items():
        assert device.key == key


def test_every_peak_in_the_catalog_is_dense_and_no_figure_is_a_calibrated_one():
    # That every number is sourced, positive and of a known kind, scope and precision is the loader's to refuse
    # (test_validation_errors, test_missing_source_names_the_field): the catalog loads through it.
    for key, device in catalog().items():
        for prec, peak in device.peak_flops.items():
            # the catalog stores dense figures only; a sparse datasheet figure goes to sparse_value
            assert peak.dense is True, (key, prec)
            if peak.sparse_value is not None:
                # NVIDIA's 2:4 structured sparsity exactly doubles the dense rate
                assert peak.sparse_value == pytest.approx(2 * peak.value), (key, prec)
        # a datasheet's figures are stated, not measured: no calibrated source and no measured inputs
        figures = [*device.peak_flops.values(), device.memory_bandwidth, device.launch_overhead, *device.caches]
        figures += [device.memory_capacity] if device.memory_capacity is not None else []
        assert not [f for f in figures if f.source.startswith("calibrated") or f.inputs], key


def test_catalog_is_plausible():
    for key, device in catalog().items():
        # GPU streams overlap launches with execution; a CPU executor dispatches node by node
        assert device.overlap == ("serial" if device.kind == "cpu" else "max"), key
        # peaks between 10 GFLOP/s (laptop fp16 at 1/64 rate) and 10 PFLOP/s; bandwidth 10 GB/s .. 10 TB/s
        for prec, peak in device.peak_flops.items():
            assert 1e10 <= peak.value <= 1e16, (key, prec)
        assert 1e10 <= device.memory_bandwidth.value <= 1e13, key
        assert 1e-7 <= device.launch_overhead.value <= 1e-4, key
        if device.memory_capacity is not None:
            assert 1e9 <= device.memory_capacity.value <= 2e12, key
        # a GPU with tensor cores lists fp16 above fp32; fp64 is never above fp32
        if "fp64" in device.peak_flops and "fp32" in device.peak_flops:
            assert device.peak_flops["fp64"].value <= device.peak_flops["fp32"].value, key
        # derived numbers and assumptions say so
        for peak in device.peak_flops.values():
            if peak.source.startswith("derived"):
                assert peak.source.startswith("derived: "), key


def test_catalog_returns_a_fresh_dict_of_frozen_hashable_devices():
    first = catalog()
    first.pop("t4")
    assert "t4" in catalog()
    device = catalog()["v100-sxm2"]
    assert catalog()["v100-sxm2"] is device  # parsed once
    with pytest.raises(dataclasses.FrozenInstanceError):
        device.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        device.peak_flops["fp32"] = device.peak_flops["fp16"]  # type: ignore[index]
    assert {device: 1}[device] == 1


# ------------------------------------------------------------------------------------------------ the papers' numbers


@pytest.mark.parametrize(
    ("key", "precision", "expected", "paper_rounding"),
    [
        # paper 003 table: V100 15.7 TFLOPS / 0.9 TB/s = 17.44 -> "17.4 FLOP/Byte"
        ("v100-sxm2", "fp32", 15.7e12 / 900e9, 17.4),
        # paper 003 table: A100 19.5 TFLOPS / 1.555 TB/s (printed as "1.555 GB/sec") = 12.54 -> "12.5 FLOP/Byte"
        ("a100-pcie-40gb", "fp32", 19.5e12 / 1555e9, 12.5),
        # paper 000 Table 1 'Arithmetic intensity' row: 784 / 56.08 = 13.98
        ("mx230", "fp32", 784e9 / 56.08e9, 13.98),
        # 953.472 / 14.4 = 66.21 -> 66.2
        ("gtx940mx", "fp32", 953.472e9 / 14.4e9, 66.2),
        # 7181 / 448 = 16.03 -> 16
        ("rtx2060-super", "fp32", 7181e9 / 448e9, 16.0),
        # paper 001: machine balance = tensor core peak / ERT HBM bandwidth = 107479 / 828.8 = 129.68
        ("v100-sxm2-ert", "fp16", 107.479e12 / 828.8e9, 129.68),
    ],
)
def test_ridge_points_from_the_papers(key, precision, expected, paper_rounding):
    ridge = load_device(key).ridge_point(precision)
    assert ridge == pytest.approx(expected, rel=1e-12)
    digits = len(str(paper_rounding).split(".")[1])
    assert round(ridge, digits) == pytest.approx(paper_rounding)


def test_paper_000_table_1():
    # fp32 peaks and bandwidths exactly as the table prints them
    assert load_device("mx230").peak("fp32") == (784e9, "fp32")
    assert load_device("gtx940mx").peak("fp32") == (953.472e9, "fp32")
    assert load_device("rtx2060-super").peak("fp32") == (7.181e12, "fp32")
    assert load_device("mx230").memory_bandwidth.value == 56.08e9
    assert load_device("gtx940mx").memory_bandwidth.value == 14.4e9
    assert load_device("rtx2060-super").memory_bandwidth.value == 448e9
    # derived rates by architecture: Pascal/Maxwell/Turing fp64 = fp32 / 32; GP108 fp16 = fp32 / 64
    assert load_device("mx230").peak("fp64")[0] == pytest.approx(784e9 / 32)
    assert load_device("mx230").peak("fp16")[0] == pytest.approx(784e9 / 64)
    assert load_device("gtx940mx").peak("fp64")[0] == pytest.approx(953.472e9 / 32)
    assert load_device("rtx2060-super").peak("fp64")[0] == pytest.approx(7.181e12 / 32)
    # Turing tensor cores, fp32 accumulate on GeForce: 272 TCs x 64 FMA x 2 x 1.65 GHz / 2
    assert load_device("rtx2060-super").peak("fp16")[0] == pytest.approx(272 * 64 * 2 * 1.65e9 / 2)


def test_paper_001_v100():
    v100 = load_device("v100-sxm2")
    assert v100.launch_overhead.value == 4.2e-6
    assert "001" in v100.launch_overhead.source
    ert = load_device("v100-sxm2-ert")
    assert ert.memory_bandwidth.value == 828.8e9
    assert ert.peak("fp32") == (15.16e12, "fp32")
    # 80 SMs x 8 tensor cores x 1.312 GHz x 4^3 x 2 = 107.479 TFLOP/s
    assert ert.peak("fp16")[0] == pytest.approx(80 * 8 * 1.312e9 * 4**3 * 2, rel=1e-5)
    # paper 001: a kernel needs 1.06e14 * 4.2e-6 = 0.4452 GFLOP not to be launch-bound at ~106 TFLOP/s
    assert 1.06e14 * ert.launch_overhead.value == pytest.approx(0.4452e9)
    for key in REQUIRED_KEYS:
        device = load_device(key)
        if device.kind == "gpu" and key != "v100-sxm2":
            assert device.launch_overhead.value == 4.2e-6
            assert "assumed" in device.launch_overhead.source


def test_paper_002_table():
    # Architecture / Peak TFLOPS / Memory Bandwidth (GB/s): T4 8.1 320, L4 30.3 300, V100 15.7 900
    for key, tflops, gbs in (("t4", 8.1, 320), ("l4", 30.3, 300), ("v100-sxm2", 15.7, 900)):
        device = load_device(key)
        assert device.peak("fp32")[0] == pytest.approx(tflops * 1e12)
        assert device.memory_bandwidth.value == pytest.approx(gbs * 1e9)
    # paper 002's theoretical step time, with its 1000x slip corrected: 270e9 FLOPs / 8.1e12 FLOP/s = 33 ms
    assert 270e9 / load_device("t4").peak("fp32")[0] == pytest.approx(0.0333, rel=1e-2)


def test_paper_004_table_1_with_sparse_figures_halved():
    # Table 1 (BF16 for accelerators, FP64 for Grace): H100 SXM 1979 and A100 SXM 624 are 2:4-sparse figures
    h100 = load_device("h100-sxm")
    assert h100.peak("bf16") == (pytest.approx(1979e12 / 2), "bf16")  # 989.5 TFLOP/s dense
    assert h100.peak_flops["bf16"].sparse_value == pytest.approx(1979e12)
    a100 = load_device("a100-sxm4-80gb")
    assert a100.peak("bf16")[0] == pytest.approx(624e12 / 2)  # 312 TFLOP/s dense
    assert a100.peak_flops["bf16"].sparse_value == pytest.approx(624e12)
    assert load_device("tpu7x").peak("bf16")[0] == pytest.approx(2307e12)
    assert load_device("tpu-v4").peak("bf16")[0] == pytest.approx(275e12)
    assert load_device("grace-cpu").peak("fp64")[0] == pytest.approx(7.1e12)
    # Memory Bandwidth (TB/s): 3.350, 2.039, 7.380, 1.200, 1.000
    for key, tbs in (
        ("h100-sxm", 3.35),
        ("a100-sxm4-80gb", 2.039),
        ("tpu7x", 7.38),
        ("tpu-v4", 1.2),
        ("grace-cpu", 1.0),
    ):
        assert load_device(key).memory_bandwidth.value == pytest.approx(tbs * 1e12)


def test_paper_004_table_2_colab():
    cpu = load_device("colab-xeon-1core")
    # 1 core x 3.2 GHz x 8 vector elements x 2 FMA units x 2 FLOP/FMA = 102.4 GFLOP/s
    assert cpu.peak("fp32") == (pytest.approx(1 * 3.2e9 * 8 * 2 * 2), "fp32")
    assert cpu.memory_bandwidth.value == pytest.approx(76.8e9)
    assert cpu.ridge_point("fp32") == pytest.approx(102.4 / 76.8)  # 1.33 FLOP/B
    assert cpu.overlap == "serial"
    # the T4 of the same table: 65000 GFLOP/s (fp16 tensor cores) at 320 GB/s
    assert load_device("t4").peak("fp16")[0] == pytest.approx(65000e9)


def test_a100_bandwidths_and_capacities():
    # paper 003's A100 is the 40 GB PCIe part (1555 GB/s); the 80 GB SXM4 part has 2039 GB/s
    assert load_device("a100-pcie-40gb").memory_bandwidth.value == 1555e9
    assert load_device("a100-sxm4-80gb").memory_bandwidth.value == 2039e9
    assert load_device("a100-pcie-40gb").memory_capacity.value == 40e9
    assert load_device("a100-sxm4-80gb").memory_capacity.value == 80e9
    # Google states GiB: TPU v4 32 GiB, TPU7x 192 GiB
    assert load_device("tpu-v4").memory_capacity.value == 32 * 2**30
    assert load_device("tpu7x").memory_capacity.value == 192 * 2**30


# ------------------------------------------------------------------------------------------------ fallback chains


def test_fallback_chains_are_well_formed():
    assert tuple(FALLBACK) == PRECISIONS
    for prec, chain in FALLBACK.items():
        assert chain[0] == prec
        assert len(set(chain)) == len(chain)
        assert set(chain) <= set(PRECISIONS)
        # every chain reaches every terminal precision, so each device (which must list one) resolves it
        assert {"fp32", "bf16", "fp16"} <= set(chain)


@pytest.mark.parametrize(
    ("key", "asked", "used"),
    [
        ("t4", "fp16", "fp16"),  # listed: no fallback
        ("t4", "bf16", "fp16"),  # Turing has no bf16: bf16 -> fp16
        ("t4", "tf32", "fp32"),  # no tf32 before Ampere: tf32 -> fp32
        ("t4", "fp8", "fp16"),  # fp8 -> fp16
        ("v100-sxm2", "bf16", "fp16"),
        ("v100-sxm2", "int8", "int8"),
        ("a100-sxm4-80gb", "fp8", "fp16"),  # no fp8 before Hopper
        ("gtx940mx", "fp16", "fp32"),  # Maxwell sm_50 has no half arithmetic: fp16 -> fp32
        ("gtx940mx", "int8", "fp32"),  # int8 -> fp16 (absent) -> bf16 (absent) -> fp32
        ("gtx940mx", "bf16", "fp32"),
        ("colab-xeon-1core", "int8", "fp32"),
        ("colab-xeon-1core", "fp16", "fp32"),
        ("grace-cpu", "bf16", "fp32"),
        ("tpu-v4", "fp32", "bf16"),  # TPUs list only bf16/int8/fp8: fp32 -> bf16
        ("tpu-v4", "fp16", "bf16"),  # fp16 -> fp32 (absent) -> bf16
        ("tpu-v4", "fp64", "bf16"),
        ("tpu-v4", "tf32", "bf16"),
        ("tpu-v4", "fp8", "bf16"),
        ("tpu-v4", "int8", "int8"),
        ("tpu7x", "fp8", "fp8"),
        ("tpu7x", "int8", "bf16"),  # int8 -> fp16 (absent) -> bf16
        ("v100-sxm2-ert", "fp64", "fp32"),  # paper 001 measured no fp64
    ],
)
def test_fallback(key, asked, used):
    device = load_device(key)
    value, got = device.peak(asked)
    assert got == used
    assert value == device.peak_flops[used].value
    assert device.ridge_point(asked) == pytest.approx(value / device.memory_bandwidth.value)


def test_every_precision_resolves_on_every_device():
    # a precision the device lists is its own; any other the first of its fallback chain that the device lists
    for device in catalog().values():
        for prec in PRECISIONS:
            _, used = device.peak(prec)
            assert used == next(p for p in FALLBACK[prec] if p in device.peak_flops), (device.key, prec)


def test_precision_aliases_and_unknown_precision():
    v100 = load_device("v100-sxm2")
    assert v100.peak("float16") == v100.peak("fp16") == v100.peak("FP16") == v100.peak("half")
    assert v100.peak("float32") == v100.peak("fp32")
    assert v100.peak("bfloat16") == v100.peak("bf16")
    with pytest.raises(UserError, match="unknown precision 'fp4'") as err:
        v100.peak("fp4")
    assert "fp32" in err.value.hint


# ------------------------------------------------------------------------------------------------ loading by name


def test_load_by_key_forgives_case_and_underscores():
    assert load_device("V100_SXM2") is load_device("v100-sxm2")
    assert load_device("  t4 ") is load_device("t4")


@pytest.mark.parametrize(
    ("name", "suggested"),
    [("v100", "v100-sxm2"), ("h100", "h100-sxm"), ("a100-sxm4", "a100-sxm4-80gb"), ("tpu-v7x", "tpu7x")],
)
def test_unknown_device_suggests_close_names(name, suggested):
    with pytest.raises(UserError, match=f"unknown device '{name}'") as err:
        load_device(name)
    assert suggested in err.value.hint
    assert "onnxroof devices" in err.value.hint


def test_unknown_device_without_close_match_still_points_to_the_list():
    with pytest.raises(UserError) as err:
        load_device("zzzz")
    assert "onnxroof devices" in err.value.hint


# ------------------------------------------------------------------------------------------------ user device files


def test_user_device_file_round_trip(tmp_path: Path):
    path = tmp_path / "my-gpu.toml"
    path.write_text(MINIMAL_DEVICE, encoding="utf-8")
    device = load_device(path)
    assert device.key == "my-gpu"  # the file stem
    assert device.name == "Test GPU"
    assert device.peak("fp16") == (80e12, "fp16")
    assert device.peak_flops["fp16"].sparse_value == 160e12
    assert device.peak("bf16") == (80e12, "fp16")  # bf16 -> fp16
    assert device.ridge_point("fp32") == pytest.approx(10e12 / 500e9)  # 20 FLOP/B
    assert device.memory_capacity == Sourced(16e9, "test datasheet: 16 GB")
    assert device.caches == (CacheLevel("L2", 4194304, None, "test datasheet: 4 MB L2", "shared"),)
    # the same file named by a string path, and written back out by to_toml, gives the same device
    assert load_device(str(path)) == device
    again = tmp_path / "again.toml"
    again.write_text(device.to_toml(), encoding="utf-8")
    assert load_device(again) == device  # to_toml writes key = "my-gpu", which wins over the stem


def test_a_device_file_names_its_engine_and_release_or_is_refused(tmp_path: Path):
    path = tmp_path / "my-gpu.toml"
    path.write_text('engine = "tensorrt:8.2"\n' + MINIMAL_DEVICE, encoding="utf-8")
    device = load_device(path)
    assert (device.engine, device.engine_release) == ("tensorrt", "8.2")
    again = tmp_path / "again.toml"
    again.write_text(device.to_toml(), encoding="utf-8")
    assert load_device(again) == device
    for engine, message in (("tvm", "unknown engine 'tvm'"), ("pytorch-eager:2.1", "takes no release '2.1'")):
        path.write_text(f'engine = "{engine}"\n' + MINIMAL_DEVICE, encoding="utf-8")
        with pytest.raises(UserError, match=re.escape(message)):
            load_device(path)


def test_every_catalog_device_round_trips_through_a_file(tmp_path: Path):
    for key, device in catalog().items():
        path = tmp_path / f"copy-of-{key}.toml"
        path.write_text(device.to_toml(), encoding="utf-8")
        assert load_device(path) == device


def test_a_table_copied_from_the_catalog_is_accepted(tmp_path: Path):
    body = MINIMAL_DEVICE.replace("[peak_flops", "[lab-gpu.peak_flops").replace("[memory", "[lab-gpu.memory")
    body = body.replace("[launch", "[lab-gpu.launch").replace("[[caches]]", "[[lab-gpu.caches]]")
    body = "[lab-gpu]\n" + body
    path = tmp_path / "whatever.toml"
    path.write_text(body, encoding="utf-8")
    device = load_device(path)
    assert device.key == "lab-gpu"
    assert device.peak("fp32") == (10e12, "fp32")


def test_missing_device_file(tmp_path: Path):
    with pytest.raises(UserError, match="device file not found") as err:
        load_device(tmp_path / "nope.toml")
    assert "onnxroof devices" in err.value.hint
    with pytest.raises(UserError, match="device file not found"):
        load_device("no/such/dir/gpu.toml")
    with pytest.raises(UserError, match="not a file"):
        load_device(tmp_path)


def test_invalid_toml(tmp_path: Path):
    path = tmp_path / "broken.toml"
    path.write_text('name = "unterminated\nkind = gpu\n', encoding="utf-8")
    with pytest.raises(UserError, match="not valid TOML"):
        load_device(path)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "dev.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _without_table(text: str, header: str) -> str:
    """MINIMAL_DEVICE minus one [table] (its header line up to the next blank line)."""
    start = text.index(header)
    end = text.index("\n\n", start) + 2
    return text[:start] + text[end:]


@pytest.mark.parametrize("field", ["memory_bandwidth", "launch_overhead"])
def test_missing_required_table_names_the_field(tmp_path: Path, field: str):
    with pytest.raises(UserError, match=f"missing required field '{field}'"):
        load_device(_write(tmp_path, _without_table(MINIMAL_DEVICE, f"[{field}]")))


@pytest.mark.parametrize("field", ["name", "kind", "overlap"])
def test_missing_required_scalar_names_the_field(tmp_path: Path, field: str):
    lines = [line for line in MINIMAL_DEVICE.splitlines() if not line.startswith(f"{field} =")]
    with pytest.raises(UserError, match=f"missing required field '{field}'"):
        load_device(_write(tmp_path, "\n".join(lines) + "\n"))


def test_missing_source_names_the_field(tmp_path: Path):
    text = MINIMAL_DEVICE.replace('source = "test datasheet: 500 GB/s"\n', "")
    with pytest.raises(UserError, match=r"memory_bandwidth: missing required field 'source'"):
        load_device(_write(tmp_path, text))
    text = MINIMAL_DEVICE.replace('source = "test datasheet: 10 TFLOPS FP32"\n', 'source = "  "\n')
    with pytest.raises(UserError, match=r"peak_flops\.fp32: field 'source' must be a non-empty string"):
        load_device(_write(tmp_path, text))


def test_a_bare_number_needs_a_source(tmp_path: Path):
    text = _without_table(MINIMAL_DEVICE, "[memory_bandwidth]").replace(
        'overlap = "max"\n', 'overlap = "max"\nmemory_bandwidth = 500e9\n'
    )
    with pytest.raises(UserError, match="'memory_bandwidth' must be a table") as err:
        load_device(_write(tmp_path, text))
    assert "source" in err.value.hint


def test_dense_must_be_stated(tmp_path: Path):
    text = MINIMAL_DEVICE.replace("value = 10e12\ndense = true\n", "value = 10e12\n")
    with pytest.raises(UserError, match=r"peak_flops\.fp32: missing required field 'dense'"):
        load_device(_write(tmp_path, text))


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('overlap = "max"', 'overlap = "sum"', "'overlap' must be one of max, serial"),
        ('kind = "gpu"', 'kind = "npu"', "'kind' must be one of gpu, cpu, tpu"),
        ("[peak_flops.fp16]", "[peak_flops.fp4]", "unknown field 'fp4'"),
        ("value = 500e9", "value = -500e9", "'value' must be positive"),
        ("value = 500e9", "value = 0", "'value' must be positive"),
        ("value = 500e9", 'value = "500 GB/s"', "'value' must be a number"),
        ("value = 500e9", "value = true", "'value' must be a number"),
        ("value = 500e9", "value = inf", "'value' must be positive"),
        (
            'dense = true\nsource = "test datasheet: 10',
            'dense = 1\nsource = "test datasheet: 10',
            "'dense' must be true or false",
        ),
        ("sparse_value = 160e12", "sparse_value = 40e12", "below the dense value"),
        ("[memory_capacity]", "[memory_capacty]", "unknown field 'memory_capacty'"),
        ('scope = "shared"', 'scope = "global"', "'scope' must be one of per-core, per-sm, shared"),
        ("size = 4194304\n", "", "caches\\[0\\]: missing required field 'size'"),
    ],
)
def test_validation_errors(tmp_path: Path, old: str, new: str, message: str):
    assert old in MINIMAL_DEVICE
    with pytest.raises(UserError, match=message):
        load_device(_write(tmp_path, MINIMAL_DEVICE.replace(old, new, 1)))


def test_misspelt_field_gets_a_suggestion(tmp_path: Path):
    with pytest.raises(UserError, match="unknown field 'memory_bandwith'") as err:
        load_device(_write(tmp_path, MINIMAL_DEVICE.replace("[memory_bandwidth]", "[memory_bandwith]")))
    assert "memory_bandwidth" in err.value.hint


def test_zero_launch_overhead_is_allowed(tmp_path: Path):
    device = load_device(_write(tmp_path, MINIMAL_DEVICE.replace("value = 5e-6", "value = 0")))
    assert device.launch_overhead.value == 0


def test_a_device_needs_fp32_bf16_or_fp16(tmp_path: Path):
    text = MINIMAL_DEVICE.replace("[peak_flops.fp32]", "[peak_flops.fp64]")
    text = _without_table(text, "[peak_flops.fp16]")
    with pytest.raises(UserError, match="at least one of fp32, bf16, fp16"):
        load_device(_write(tmp_path, text))


def test_device_from_dict_is_the_shared_parser():
    data = {
        "name": "bf16-only accelerator",
        "kind": "tpu",
        "overlap": "max",
        "peak_flops": {"bf16": {"value": 100e12, "dense": True, "source": "test"}},
        "memory_bandwidth": {"value": 1e12, "source": "test"},
        "launch_overhead": {"value": 1e-6, "source": "test"},
    }
    device = device_from_dict("acc", data)
    assert device.memory_capacity is None and device.caches == () and device.engine is None
    # every precision resolves to the one listed
    assert {device.peak(prec)[1] for prec in PRECISIONS} == {"bf16"}
    assert device.ridge_point("fp32") == pytest.approx(100.0)
    with pytest.raises(UserError, match="contradicts"):
        device_from_dict("acc", {**data, "key": "other"})
    with pytest.raises(UserError, match="missing required field 'peak_flops'"):
        device_from_dict("acc", {k: v for k, v in data.items() if k != "peak_flops"})


def test_devices_serialize_to_plain_json_and_pickle():
    import copy
    import json
    import pickle

    device = load_device("h100-sxm")
    data = json.loads(json.dumps(device.to_dict()))
    assert data["peak_flops"]["bf16"] == {
        "value": 989.5e12,
        "dense": True,
        "source": device.peak_flops["bf16"].source,
        "sparse_value": 1979e12,
    }
    assert data["caches"][0]["level"] == "L2"
    assert json.loads(json.dumps(dataclasses.asdict(device)))["memory_bandwidth"]["value"] == 3.35e12
    assert pickle.loads(pickle.dumps(device)) == device
    assert copy.deepcopy(device) == device


# ------------------------------------------------------------------------------------------------ calibrated hosts

CALIBRATED_DEVICE = """\
name = "Test host (calibrated)"
kind = "cpu"
overlap = "serial"
engine = "onnxruntime"

[peak_flops.fp32]
value = 150e9
dense = true
source = "calibrated: Gemm 1024x1024x1024"

[memory_bandwidth]
value = 12e9
source = "calibrated: MatMul streaming 1 GiB"

[launch_overhead]
value = 3e-7
source = "calibrated: chains of Neg"

[run_overhead]
value = 8e-6
source = "calibrated: a one-node graph"

[dram_overlap]
value = 0.4
source = "calibrated: a batch-16 conv"

[network_factor]
value = 1.12
source = "calibrated: the reference block"

[softmax_underflow]
value = 1.7e-8
source = "calibrated: a masked attention block"

[subnormal_product]
value = 0
source = "calibrated: a masked attention block"

[weight_reuse]
points = [[3.2e7, 1.0], [4e6, 2.5]]
source = "calibrated: chains of MatMul back to back"

[conv_weight_wait]
points = [[9.4e6, 0.5], [6e5, 1.0], [2e5, 0]]
source = "calibrated: convolutions with cold and warm weights"

[[caches]]
level = "L2"
size = 2097152
scope = "per-core"
bandwidth = 45e9
source = "calibrated: chain of Neg over 1 MiB"

[calibration]
provider = "cpu"
threads = 1
onnxruntime = "1.23.2"
cpu = "Test CPU"
date = "2025-01-01T00:00:00+00:00"
duration_s = 95.5
profiler_overhead = 2.5e-6
reference_time_s = 1.9e-3
warnings = ["timings varied between repeats"]
suite = 2

[ceilings.conv]
compute = [[2.3e8, 0.9], [2e7, 0.7]]
source = "calibrated: nchwc Conv 3x3"

[ceilings.elementwise]
memory = [[1e4, 0.4], [1e6, 1.1]]
source = "calibrated: chains of Relu and Add"

[ceilings.lrn]
compute = [[1e6, 0.002]]
memory = [[1e6, 0.5]]
source = "calibrated: chains of LRN"

[ceilings.epilogue]
memory = [[4e5, 0.3]]
source = "calibrated: convolutions with Clip less with Relu"
"""


def test_a_profile_with_the_older_suites_reference_rate_reads_without_a_reference(tmp_path: Path):
    """Files of suites 1-3 hold a lone MatMul's rate (reference_flops_s), which says nothing of the reference block's
    time: such a file reads without a reference reading."""
    older = CALIBRATED_DEVICE.replace("reference_time_s = 1.9e-3", "reference_flops_s = 4.1e10")
    assert older != CALIBRATED_DEVICE
    calibration = load_device(_write(tmp_path, older)).calibration
    assert calibration is not None and calibration.reference_time_s is None


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ("points = [[4e6, 2.5]]", "missing required field 'source'"),
        ('source = "x"', "needs 'points'"),
        ('points = [[4e6, -1.0]]\nsource = "x"', "must be positive"),
        ('points = [[4e6, 2.5], [4e6, 2.0]]\nsource = "x"', "two points at work 4e+06"),
    ],
)
def test_a_bad_weight_reuse_table_is_refused(tmp_path: Path, table: str, says: str):
    text = CALIBRATED_DEVICE.replace(
        'points = [[3.2e7, 1.0], [4e6, 2.5]]\nsource = "calibrated: chains of MatMul back to back"', table
    )
    assert text != CALIBRATED_DEVICE
    with pytest.raises(UserError, match=re.escape(says)):
        load_device(_write(tmp_path, text))


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ('source = "x"', "needs 'points'"),
        ('points = [[6e5, -0.1]]\nsource = "x"', "must be positive"),
        ('points = [[0, 1.0]]\nsource = "x"', "must be positive"),
    ],
)
def test_a_bad_conv_weight_wait_table_is_refused(tmp_path: Path, table: str, says: str):
    text = CALIBRATED_DEVICE.replace(
        'points = [[9.4e6, 0.5], [6e5, 1.0], [2e5, 0]]\nsource = "calibrated: convolutions with cold and warm weights"',
        table,
    )
    assert text != CALIBRATED_DEVICE
    with pytest.raises(UserError, match=re.escape(says)):
        load_device(_write(tmp_path, text))


def test_a_weight_wait_share_is_interpolated_in_log_bytes_and_never_negative():
    wait = WeightWait(((1e5, 0.0), (1e6, 1.0), (1e7, 0.4)), "x")
    # held beyond the measured range; halfway in log(bytes) from 1e5 to 1e6 is 10^5.5 bytes: a share of 0.5
    assert wait.share(1e4) == 0.0 and wait.share(1e8) == 0.4
    assert wait.share(10**5.5) == pytest.approx(0.5)
    # 10^6.5 bytes: halfway from 1.0 to 0.4
    assert wait.share(10**6.5) == pytest.approx(0.7)


def test_calibrated_device_round_trip(tmp_path: Path):
    from onnxroof.devices import Calibration, Ceiling

    device = load_device(_write(tmp_path, CALIBRATED_DEVICE))
    assert device.engine == "onnxruntime"
    assert device.run_overhead == Sourced(8e-6, "calibrated: a one-node graph")
    assert device.dram_overlap == Sourced(0.4, "calibrated: a batch-16 conv")
    assert device.network_factor == Sourced(1.12, "calibrated: the reference block")
    assert device.softmax_underflow == Sourced(1.7e-8, "calibrated: a masked attention block")
    assert device.subnormal_product == Sourced(0.0, "calibrated: a masked attention block")  # 0: no slow path
    # sorted by traffic like a ceiling's points
    assert device.weight_reuse == WeightReuse(((4e6, 2.5), (3.2e7, 1.0)), "calibrated: chains of MatMul back to back")
    # a share may be 0 (the cold run took no longer)
    assert device.conv_weight_wait == WeightWait(
        ((2e5, 0.0), (6e5, 1.0), (9.4e6, 0.5)), "calibrated: convolutions with cold and warm weights"
    )
    assert device.caches[0].bandwidth == 45e9
    assert device.calibration == Calibration(
        "cpu",
        1,
        "1.23.2",
        "Test CPU",
        "2025-01-01T00:00:00+00:00",
        95.5,
        ("timings varied between repeats",),
        2.5e-6,
        1.9e-3,
        2,
    )
    # points are sorted by work whatever order the file gives them in
    assert device.ceilings["conv"] == Ceiling(((2e7, 0.7), (2.3e8, 0.9)), (), "calibrated: nchwc Conv 3x3")
    assert device.ceilings["lrn"].memory == ((1e6, 0.5),)
    # in CEILING_NAMES order: the op classes', then the part ceilings'
    assert list(device.ceilings) == ["conv", "lrn", "elementwise", "epilogue"]
    assert device.ceilings["epilogue"].memory == ((4e5, 0.3),)
    again = tmp_path / "again.toml"
    again.write_text(device.to_toml(), encoding="utf-8")
    assert load_device(again) == device
    hash(device)  # still a frozen, hashable value


def test_a_file_written_before_figures_had_inputs_loads_with_none(tmp_path: Path):
    device = load_device(_write(tmp_path, CALIBRATED_DEVICE))
    assert device.run_overhead is not None and device.run_overhead.inputs == {}
    assert device.peak_flops["fp32"].inputs == {} and device.caches[0].inputs == {}


WITH_INPUTS = (
    CALIBRATED_DEVICE.replace(
        'source = "calibrated: a one-node graph"\n',
        'source = "calibrated: a one-node graph"\ninputs = { run_s = 1.1e-05, node_s = 3e-6, passes = 2 }\n',
    )
    .replace(
        'source = "calibrated: Gemm 1024x1024x1024"\n',
        'source = "calibrated: Gemm 1024x1024x1024"\ninputs = { measured_flops_s = 1.6e11 }\n',
    )
    .replace(
        'source = "calibrated: chain of Neg over 1 MiB"\n',
        'source = "calibrated: chain of Neg over 1 MiB"\ninputs = { bytes = 1048576, node_s = -1.5e-7 }\n',
    )
)


def test_a_figures_inputs_round_trip_through_the_device_file_and_its_json(tmp_path: Path):
    import json

    assert WITH_INPUTS.count("inputs = {") == 3
    device = load_device(_write(tmp_path, WITH_INPUTS))
    assert device.run_overhead is not None
    assert device.run_overhead.inputs == {"run_s": 1.1e-5, "node_s": 3e-6, "passes": 2}
    assert device.peak_flops["fp32"].inputs == {"measured_flops_s": 1.6e11}
    assert device.caches[0].inputs == {"bytes": 1048576, "node_s": -1.5e-7}  # a measured input may be negative
    again = tmp_path / "again.toml"
    again.write_text(device.to_toml(), encoding="utf-8")
    assert load_device(again) == device
    hash(device)
    data = json.loads(json.dumps(device.to_dict()))
    assert data["run_overhead"]["inputs"] == {"run_s": 1.1e-5, "node_s": 3e-6, "passes": 2}
    assert data["caches"][0]["inputs"] == {"bytes": 1048576, "node_s": -1.5e-7}
    assert "inputs" not in data["memory_bandwidth"]  # a figure without inputs is written as before


@pytest.mark.parametrize(
    ("inputs", "says"),
    [
        ('inputs = "fast"', "field 'inputs' must be a table of names to numbers"),
        ('inputs = { run_s = "11 us" }', "inputs: run_s must be a finite number"),
        ("inputs = { run_s = true }", "inputs: run_s must be a finite number"),
        ("inputs = { run_s = inf }", "inputs: run_s must be a finite number"),
        ('inputs = { "Run s" = 1 }', "inputs: 'Run s' is not a name"),
    ],
)
def test_bad_inputs_are_refused(tmp_path: Path, inputs: str, says: str):
    text = CALIBRATED_DEVICE.replace(
        'source = "calibrated: a one-node graph"\n', f'source = "calibrated: a one-node graph"\n{inputs}\n'
    )
    assert text != CALIBRATED_DEVICE
    with pytest.raises(UserError, match=re.escape(says)):
        load_device(_write(tmp_path, text))


def test_calibrated_device_serializes_to_plain_json(tmp_path: Path):
    import json
    import pickle

    device = load_device(_write(tmp_path, CALIBRATED_DEVICE))
    data = json.loads(json.dumps(device.to_dict()))
    assert data["ceilings"]["conv"] == {
        "compute": [[2e7, 0.7], [2.3e8, 0.9]],
        "memory": [],
        "source": "calibrated: nchwc Conv 3x3",
    }
    assert data["calibration"]["warnings"] == ["timings varied between repeats"]
    assert data["run_overhead"]["value"] == 8e-6
    assert data["weight_reuse"]["points"] == [[4e6, 2.5], [3.2e7, 1.0]]
    assert data["conv_weight_wait"]["points"] == [[2e5, 0.0], [6e5, 1.0], [9.4e6, 0.5]]
    assert pickle.loads(pickle.dumps(device)) == device


def test_datasheet_devices_have_no_engine_profile():
    for key, device in catalog().items():
        assert device.run_overhead is None and device.dram_overlap is None and device.network_factor is None, key
        assert device.weight_reuse is None and device.conv_weight_wait is None, key
        assert device.calibration is None, key
        assert dict(device.ceilings) == {}, key
        assert "[ceilings" not in device.to_toml() and "[calibration]" not in device.to_toml(), key


def test_ceiling_efficiency_is_interpolated_in_log_work(tmp_path: Path):
    ceiling = load_device(_write(tmp_path, CALIBRATED_DEVICE)).ceilings["elementwise"]
    assert ceiling.memory_efficiency(1e3) == 0.4
    assert ceiling.memory_efficiency(1e5) == pytest.approx(0.75)
    assert ceiling.memory_efficiency(1e7) == 1.1
    assert ceiling.compute_efficiency(1e5) == 1.0


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("[ceilings.lrn]", "[ceilings.lrm]", "unknown field 'lrm'"),
        ("compute = [[1e6, 0.002]]\nmemory = [[1e6, 0.5]]\n", "", "needs a 'compute' or a 'memory' table"),
        ("[[2.3e8, 0.9], [2e7, 0.7]]", "[[2.3e8, 0.9], [2.3e8, 0.7]]", "two points at work"),
        ("[[2.3e8, 0.9], [2e7, 0.7]]", "[[2.3e8, -0.9]]", "must be positive"),
        ("[[2.3e8, 0.9], [2e7, 0.7]]", "[2.3e8, 0.9]", "each point must be"),
        ("[[2.3e8, 0.9], [2e7, 0.7]]", "[]", "non-empty array"),
        ('source = "calibrated: nchwc Conv 3x3"\n', "", "ceilings.conv: missing required field 'source'"),
        ("threads = 1", "threads = 0", "'threads' must be a positive integer"),
        ("threads = 1", "threads = 1.5", "'threads' must be a positive integer"),
        ("suite = 2", "suite = 0", "'suite' must be a positive integer"),
        ("suite = 2", 'suite = "2"', "'suite' must be a positive integer"),
        ('warnings = ["timings varied between repeats"]', "warnings = [1]", "'warnings' must be an array"),
        ("duration_s = 95.5", "duration_s = -1", "'duration_s' must be non-negative"),
        ('cpu = "Test CPU"\n', "", "calibration: missing required field 'cpu'"),
        ("[run_overhead]\nvalue = 8e-6\n", "[run_overhead]\nvalue = -8e-6\n", "'value' must be non-negative"),
        ("[dram_overlap]\nvalue = 0.4\n", "[dram_overlap]\nvalue = 1.5\n", "dram_overlap: value 1.5 is a share"),
    ],
)
def test_calibrated_device_validation_errors(tmp_path: Path, old: str, new: str, message: str):
    assert old in CALIBRATED_DEVICE
    with pytest.raises(UserError, match=message):
        load_device(_write(tmp_path, CALIBRATED_DEVICE.replace(old, new, 1)))


def test_a_calibration_without_a_suite_was_measured_by_the_first_one(tmp_path: Path):
    device = load_device(_write(tmp_path, CALIBRATED_DEVICE.replace("suite = 2\n", "")))
    assert device.calibration is not None and device.calibration.suite == 1


def test_misspelt_ceiling_class_gets_a_suggestion(tmp_path: Path):
    with pytest.raises(UserError) as err:
        load_device(_write(tmp_path, CALIBRATED_DEVICE.replace("[ceilings.conv]", "[ceilings.conv1x2]")))
    assert "conv1x1" in err.value.hint


def test_a_calibrated_profile_names_its_cpu_threads_onnxruntime_and_date():
    from tests.helpers import calibrated_host

    host = calibrated_host(threads=2)
    assert host.calibration is not None
    assert host.calibration.describe() == "test cpu, 2 threads, onnxruntime 1.0, calibrated 2025-01-01"
    assert host.label() == "host (test cpu, 2 threads, onnxruntime 1.0, calibrated 2025-01-01)"
    one = dataclasses.replace(
        host, calibration=dataclasses.replace(host.calibration, threads=1, date="2026-12-01T10:00:00+00:00")
    )
    assert one.label() == "host (test cpu, 1 thread, onnxruntime 1.0, calibrated 2026-12-01)"
    assert load_device("v100-sxm2").label() == load_device("v100-sxm2").name  # a datasheet device: its name


def test_a_profile_beyond_its_cores_limits_does_not_load(tmp_path: Path):
    from tests.helpers import calibrated_host

    host = calibrated_host()  # L1d 100 GB/s, L2 50 GB/s, DRAM 10 GB/s, fp32 100 GFLOP/s
    limited = dataclasses.replace(
        host, load_limit=Sourced(60e9, "derived: test"), flop_limit=Sourced(200e9, "derived: test")
    )
    assert limit_violations(limited) == [
        "L1d bandwidth 100 GB/s is above the cores' load and store rate, 60 GB/s (derived: test)"
    ]
    path = tmp_path / "host.toml"
    path.write_text(limited.to_toml(), encoding="utf-8")
    with pytest.raises(UserError, match=r"L1d bandwidth 100 GB/s is above .*: no core moves or computes that fast"):
        load_device(path)
    within = dataclasses.replace(limited, load_limit=Sourced(1e12, "derived: test"))
    path.write_text(within.to_toml(), encoding="utf-8")
    assert load_device(path) == within  # the limits round-trip
    slow = dataclasses.replace(within, flop_limit=Sourced(50e9, "derived: test"))
    assert limit_violations(slow) == [
        "fp32 peak 100 GFLOP/s is above the cores' vector rate, 50 GFLOP/s (derived: test)"
    ]
