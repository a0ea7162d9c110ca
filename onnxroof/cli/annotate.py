"""onnxroof annotate: write each node's costs and predicted time into the model, for Netron and Model Explorer."""

from __future__ import annotations

import argparse
import os
import warnings
from pathlib import Path

from onnxroof.cli.common import (
    Progress,
    add_engine_option,
    add_shape_options,
    add_what_if_options,
    check_output,
    dims,
    emit,
    resolve_devices,
    warn,
)
from onnxroof.errors import UserError

HELP = "write per-node FLOPs, bytes, bound and predicted time into the model (Netron, Model Explorer)"
DESCRIPTION = """Annotate an ONNX model with its analysis, for the viewers it is opened in.

Each node's metadata_props get its FLOPs, MACs, bytes moved, params, arithmetic intensity, bound (compute,
memory, overhead or none), predicted time and its share of the model's, precision and device, under keys
'onnxroof.*' with readable values ("1.23 GFLOP", "4.5 MB", "12.3 FLOP/B", "0.123 ms"). The model's
metadata_props get a summary: device, precision, totals, predicted time and time by bound, and the onnxroof
version (no dates: the same inputs give the same file). Netron shows a node's values when it is selected and the
summary when nothing is. Nodes computed from weights only (folded at load) are marked so; nodes inside If, Loop
and Scan bodies get no values (their cost is the enclosing node's), and the summary counts both.

Nothing else changes: the annotated model runs as the original does. Annotating an annotated model replaces the
'onnxroof.*' keys and keeps every other metadata entry. The model is read with its weights (external data only
from the model's own folder) and written with them; one of 2 GB or more keeps them in OUT.data beside it.

The prediction is made on the graph as exported, also on a calibrated host (--device host): onnxruntime's
optimized graph has nodes (fused convolutions, NCHWc layouts) that do not exist in the file.

--model-explorer FILE.json also writes the per-node values as node data for Google's Model Explorer (with the
model-explorer-onnx adapter: model-explorer --extensions=model_explorer_onnx), keyed by that adapter's node ids:
load it in the side panel to colour the graph. --model-explorer-value picks the value: time (predicted time in
microseconds, a heatmap), bound (0 none, 1 compute, 2 memory, 3 overhead, one colour each), intensity (FLOP/B) or
flops.

examples:
  onnxroof annotate model.onnx -o model.annotated.onnx --device a100-sxm4-80gb
  onnxroof annotate zoo:resnet50 -o resnet50.onnx -d t4 -p fp16 --model-explorer resnet50_time.json
  onnxroof annotate model.onnx -o out.onnx --dim batch=8 --model-explorer bound.json --model-explorer-value bound
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="an .onnx file or zoo:NAME")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.onnx", help="where to write the annotated model")
    parser.add_argument(
        "-d",
        "--device",
        default=None,
        help="catalog key (see 'onnxroof devices'), a device .toml file or host; default v100-sxm2",
    )
    add_engine_option(parser)
    add_what_if_options(parser)
    add_shape_options(parser)
    parser.add_argument(
        "--model-explorer",
        default=None,
        metavar="FILE.json",
        help="also write the per-node values as Model Explorer node data",
    )
    parser.add_argument(
        "--model-explorer-value",
        default="time",
        choices=("time", "bound", "intensity", "flops"),
        help="the value --model-explorer writes (default time)",
    )
    parser.add_argument("--force", action="store_true", help="replace OUT.onnx and FILE.json if they exist")
    parser.add_argument(
        "-f", "--format", default="table", choices=("table", "json"), help="the summary printed (default table)"
    )


def _same_file(a: str, b: str) -> bool:
    return Path(a).resolve() == Path(b).resolve()


def run(args: argparse.Namespace) -> int:
    from onnxroof.api import DEFAULT_DEVICE, analyze
    from onnxroof.atomic import write_text
    from onnxroof.passes.model_file import read_source, write_model
    from onnxroof.predict.precision import check_precision
    from onnxroof.report.annotate import annotate, render_annotation
    from onnxroof.report.format import output_width
    from onnxroof.report.model_explorer import node_data_json

    outputs = [args.output] + ([args.model_explorer] if args.model_explorer else [])
    is_file = not os.fspath(args.model).startswith("zoo:")
    for output in outputs:
        if is_file and _same_file(output, args.model):
            raise UserError(f"{output} is the input model", "annotate into another file: the input is never modified")
    if args.model_explorer and _same_file(args.output, args.model_explorer):
        raise UserError(f"{args.output} is given for both outputs", "choose a .json file for --model-explorer")
    check_output(args.output, args.force, (".onnx",))
    if args.model_explorer:
        check_output(args.model_explorer, args.force, (".json",))
    shape_dims = dims(args)
    check_precision(args.precision)

    progress = Progress("annotating")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the analysis' own warnings are printed once, below
            (device,) = resolve_devices([args.device or DEFAULT_DEVICE], args.threads, progress)
            progress.stage("reading the model and its weights")
            source = read_source(args.model)
            progress.stage("loading and inferring shapes")
            # The file itself is analyzed, read without its weights, rather than the proto that holds them.
            analysis = analyze(
                args.model,
                device=device,
                as_exported=True,
                inputs=dict(args.input),
                dims=shape_dims,
                precision=args.precision,
                progress=progress,
                values=dict(args.value),
            )
        progress.stage("writing")
        done = annotate(source.model, analysis)
        written = [str(p) for p in write_model(done.model, args.output, force=args.force)]
        if args.model_explorer:
            write_text(args.model_explorer, node_data_json(done.model, done.results, args.model_explorer_value))
            written.append(args.model_explorer)
    finally:
        progress.close()
    for message in analysis.warnings:
        warn(message)
    emit(render_annotation(done, written, args.format, graph_only=source.graph_only, width=output_width()), None)
    return 0
