"""onnxroof devices: the device catalog."""

from __future__ import annotations

import argparse
import json

HELP = "list the device catalog"
DESCRIPTION = "The device catalog: every number with its source in --format json."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--format", default="table", choices=("table", "json"))


def run(args: argparse.Namespace) -> int:
    from onnxroof.devices import PRECISIONS, catalog

    devices = catalog()
    if args.format == "json":
        print(json.dumps({key: d.to_dict() for key, d in devices.items()}, indent=2))
        return 0
    columns = "{:<17} {:<4} {:>9} {:>9} {:>9} {:>9} {:>10} {:>8} {:>7} {:>7}"
    print(columns.format("key", "kind", "fp64", "fp32", "fp16", "bf16", "int8", "GB/s", "GB", "launch"))
    for key, d in devices.items():
        peaks = {p: d.peak_flops[p].value / 1e12 for p in PRECISIONS if p in d.peak_flops}
        cells = [f"{peaks[p]:.4g}" if p in peaks else "-" for p in ("fp64", "fp32", "fp16", "bf16", "int8")]
        capacity = f"{d.memory_capacity.value / 1e9:.4g}" if d.memory_capacity else "-"
        print(
            columns.format(
                key,
                d.kind,
                *cells,
                f"{d.memory_bandwidth.value / 1e9:.4g}",
                capacity,
                f"{d.launch_overhead.value * 1e6:.3g}us",
            )
        )
    print("\nPeaks in dense TFLOP/s (int8: TOPS). 'onnxroof devices --format json' gives every number's source.")
    return 0
