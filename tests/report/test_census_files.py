"""Census rows to CSV, JSON and Parquet and back, the checkpoints that rewrite a file as rows arrive, the table,
and the census figure's data."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from onnxroof.errors import UserError
from onnxroof.report.census import render_census
from onnxroof.report.census_files import Checkpoint, read_census, require_parquet, write_census
from onnxroof.report.figures.census_data import census_data
from onnxroof.whatif.census import FIELDS, row_key


def row(model: str, device: str = "v100-sxm2", **values: Any) -> dict[str, Any]:
    """A row of every field: a MatMul [1,64]x[64,32] (FLOPs 2*64*32 = 4096, bytes 256 + 8192 + 128 = 8576)."""
    base = dict.fromkeys(FIELDS)
    base.update(model=model, device=device, engine="roofline", batch=1, precision="stored", analyzed_batch=1)
    base.update(flops=4096.0, macs=2048.0, params=2048, bytes_moved=8576.0, intensity=4096 / 8576)
    base.update(predicted_time_s=4.2e-06, throughput_per_s=1 / 4.2e-06, bound="overhead", peak_memory_bytes=8576.0)
    base.update(footprint_bytes=8704.0)
    base.update(memory_capacity_bytes=16e9, fits=True, uncounted=0)
    base.update(values)
    return base


def failed(model: str) -> dict[str, Any]:
    """An error row: the key, the error (a comma and quotes, which CSV must quote), None for every number."""
    base = dict.fromkeys(FIELDS)
    base.update(model=model, device="v100-sxm2", engine="roofline", batch=1, precision="fp16", error='bad, "quoted"')
    return base


def sample() -> list[dict[str, Any]]:
    """A row, one on a device without a memory capacity at the model's own batch, and an error row."""
    return [
        row("a.onnx"),
        row("zoo:unet", "colab-xeon-1core", batch=None, memory_capacity_bytes=None, fits=None),
        failed("broken.onnx"),
    ]


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_text_formats_round_trip(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"census{suffix}"
    write_census(path, sample())
    assert read_census(path) == sample()


def test_parquet_round_trips_where_pyarrow_is_installed(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    path = tmp_path / "census.parquet"
    write_census(path, sample())
    assert read_census(path) == sample()


def test_parquet_without_pyarrow_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    with pytest.raises(UserError) as caught:
        require_parquet()
    assert caught.value.hint == "pip install 'onnxroof[parquet]'"
    with pytest.raises(UserError):
        write_census(tmp_path / "c.parquet", sample())
    assert not (tmp_path / "c.parquet").exists()


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("other.csv", "name,size\nx,1\n"),
        ("other.json", '{"nodes": []}'),
        ("broken.json", "{"),
        ("typed.csv", "model,device,engine,batch,precision\nm,d,e,one,stored\n"),
    ],
)
def test_a_file_that_is_no_census_is_a_user_error(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(UserError, match="is not a census output"):
        read_census(path)


def test_an_empty_csv_is_a_census_without_rows(tmp_path: Path) -> None:
    (tmp_path / "c.csv").write_text("")
    assert read_census(tmp_path / "c.csv") == []


def test_a_checkpoint_writes_after_its_interval_or_its_row_count_and_at_close(tmp_path: Path) -> None:
    path, now = tmp_path / "c.json", [0.0]
    rows = [row(f"m{i}.onnx") for i in range(6)]
    planned = [row_key(r) for r in rows]
    sink = Checkpoint(path, [], planned, interval_s=5.0, every=3, clock=lambda: now[0])
    sink.add(rows[1:2])
    assert not path.exists()  # neither 5 s nor 3 rows yet
    now[0] = 6.0
    sink.add(rows[0:1])
    assert read_census(path) == rows[0:2]  # 6 s since the start: written, in the planned order
    sink.add(rows[2:5])
    assert read_census(path) == rows[0:5] and sink.writes == 2  # 3 rows
    sink.add(rows[5:6])
    assert sink.writes == 2
    sink.close()
    assert read_census(path) == rows and sink.writes == 3


def test_the_table_names_failures_and_empty_fits() -> None:
    text = render_census(sample(), "table")
    assert 'bad, "quoted"' in text and "3 rows: 3 models on 2 devices, 1 failed" in text
    assert "the device lists no memory capacity" in text
    assert "4.10 k" in text  # the FLOPs, 4096


def test_the_census_figure_has_a_point_per_analysed_row() -> None:
    data = census_data(sample())
    assert [(p.model, p.device, p.footprint_bytes, p.flops, p.fits) for p in data.points] == [
        ("a", "v100-sxm2", 8704.0, 4096.0, True),
        ("unet", "colab-xeon-1core", 8704.0, 4096.0, None),
    ]
    assert data.left_out == 1 and data.devices == ("v100-sxm2", "colab-xeon-1core")
    assert data.labelled
