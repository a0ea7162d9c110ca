"""onnxroof llm: a decoder's generation predicted phase by phase: time to first token, time per token, tokens/s,
memory."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from onnxroof.cli.common import (
    Progress,
    add_devices_option,
    add_dim_option,
    add_output_options,
    check_output_option,
    dims,
    emit,
    resolve_devices,
    split_list,
)
from onnxroof.errors import UserError

if TYPE_CHECKING:
    from onnxroof.devices import Device

HELP = "a decoder's generation: time to first token, time per token as the KV cache grows, tokens/s, memory"
DESCRIPTION = """Predict how a decoder LLM generates on a device, from its one-step ONNX graph with a KV cache
(onnxruntime GenAI's layout with GroupQueryAttention, optimum's 'with past' exports, ONNX Attention with a past).
The decoder's batch, new-token, past and total dims are found from its attention nodes, not from input names.

A prompt of P tokens is one prefill step (the time to the first token); each of the G generated tokens is one
decode step over the cache so far: the first reads P rows, the last P+G-1. More than --samples decode steps are
interpolated between that many analyzed ones, evenly spaced (the output says so). tokens/s is the decode
throughput: batch / mean step time. Memory: the weights, the KV cache at P+G tokens, the largest step's
activations (the caches left out), and their sum, the peak.

--measure times the prefill and each decode step analyzed here with onnxruntime (on inputs whose masks, lengths
and positions agree with the cache; random weights where the model has none) and shows them beside this machine's
calibrated prediction (--device host, the default with --measure).

--tensor-parallel N splits the model over N GPUs as Megatron-LM does (TensorRT-LLM's and vLLM's tensor
parallelism): each runs 1/N of every matrix product and attention, the norms and residual adds whole, and two
all-reduces a layer over the device's GPU-to-GPU link (NVLink or PCIe, by NCCL's ring cost model); times and
memory are one GPU's.

--shared-buffer predicts what onnxruntime GenAI runs on a GPU: past and present share one buffer of P+G rows, so
each step writes its new rows only. Every step is the analysis 'onnxroof analyze' makes, on the device and engine
given; --format json has prefill_s, decode_s (first, mean, last), tokens_per_s, kv_cache_bytes, weights_bytes,
peak_bytes and each step analyzed.

Several devices (-d a100-sxm4-80gb,l4) give one prediction each (--format json: {"devices": [...]}); --figure FILE
draws time per token against context for each, beside each phase on its device's roofline.

examples:
  onnxroof llm zoo:llama-3-8b-int4 --prompt 512 --generate 128 -d a100-sxm4-80gb
  onnxroof llm zoo:llama-3.2-1b-fp16 --prompt 2048 --generate 256 --batch 8 -d h100-sxm5 --engine tensorrt
  onnxroof llm model.onnx --prompt 128 --generate 32 -d host --format json -o llm.json
  onnxroof llm zoo:tiny-decoder-int4 --prompt 64 --generate 16 --measure
  onnxroof llm zoo:llama-3-8b-int4 --prompt 512 --generate 1024 -d a100-sxm4-80gb,l4 --figure tokens.png
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="a decoder .onnx file with a KV cache, or zoo:NAME-QUANT")
    parser.add_argument("--prompt", type=int, required=True, metavar="P", help="prompt tokens (the prefill)")
    parser.add_argument("--generate", type=int, required=True, metavar="G", help="tokens generated (decode steps)")
    parser.add_argument("--batch", type=int, default=1, metavar="B", help="sequences generated together (default 1)")
    add_devices_option(
        parser, "catalog key, device .toml file or host; repeatable or comma-separated (default v100-sxm2)"
    )
    parser.add_argument(
        "--shared-buffer",
        action="store_true",
        help="past and present share one buffer of P+G rows (GroupQueryAttention, as onnxruntime GenAI runs on GPUs)",
    )
    parser.add_argument(
        "--tensor-parallel",
        type=int,
        default=1,
        metavar="N",
        help="split the model over N GPUs of the device (Megatron's split, all-reduces over its NVLink or PCIe)",
    )
    parser.add_argument(
        "--samples", type=int, default=None, metavar="N", help="decode steps analyzed where there are more (default 9)"
    )
    parser.add_argument(
        "--measure", action="store_true", help="also time the steps here with onnxruntime (against --device host)"
    )
    parser.add_argument(
        "--figure",
        default=None,
        metavar="FILE",
        help="also draw time per token against context per device, each phase on its roofline (.png, .svg, .pdf)",
    )
    add_dim_option(parser, "fix another symbolic dim of the model (repeatable)")
    parser.add_argument("--threads", type=int, default=1, metavar="N", help="--device host: the calibration's threads")
    parser.add_argument("-f", "--format", default="table", choices=("table", "json"), help="output format")
    add_output_options(parser)


def run(args: argparse.Namespace) -> int:
    from onnxroof.api import DEFAULT_DEVICE
    from onnxroof.load.read import read_model
    from onnxroof.report.decoder import render_decoders
    from onnxroof.report.format import output_width

    check_output_option(args)
    named = split_list(args.device) or ["host" if args.measure else DEFAULT_DEVICE]
    _check_measure(args, named)
    if args.figure:
        from onnxroof.report.figures.decoder_drawing import check_figure_path

        check_figure_path(args.figure, args.force)
    progress = Progress("predicting")
    try:
        devices = resolve_devices(named, args.threads, progress)
        progress.stage("reading the model")
        model, name = read_model(args.model, weight_bytes=False)
        results = [_predicted(args, model, name, device, progress) for device in devices]
    finally:
        progress.close()
    emit(render_decoders(results, args.format, width=output_width(args.output)), args.output)
    if args.figure:
        from onnxroof.report.figures.decoder_data import DecoderOnDevice
        from onnxroof.report.figures.decoder_drawing import write_decoder_figure

        runs = [DecoderOnDevice(r, d, r.precision or None) for r, d in zip(results, devices)]
        write_decoder_figure(runs, args.figure, force=args.force)
    return 0


def _check_measure(args: argparse.Namespace, named: list[str]) -> None:
    if not args.measure:
        return
    if args.tensor_parallel != 1:
        raise UserError("--measure times this machine, which is one device", "drop --tensor-parallel with --measure")
    others = [d for d in named if d != "host"]
    if others:
        raise UserError(
            f"--measure times this machine, not {others[0]}", "drop --device (or give --device host) with --measure"
        )


def _predicted(args: argparse.Namespace, model: Any, name: str, device: Device, progress: Progress) -> Any:
    """The prediction on one device, timed here with --measure."""
    from onnxroof.whatif.decoder import DEFAULT_SAMPLES, predict_decoder

    fixed = dims(args)
    progress.stage(f"predicting on {device.key}")
    result = predict_decoder(
        model,
        device,
        prompt=args.prompt,
        generate=args.generate,
        batch=args.batch,
        shared_buffer=args.shared_buffer,
        samples=args.samples or DEFAULT_SAMPLES,
        dims=fixed,
        tensor_parallel=args.tensor_parallel,
        name=name,
        progress=progress.stage,
    )
    if args.measure:
        from onnxroof.whatif.decoder_measure import measure_generation

        result = measure_generation(args.model, result, threads=args.threads, dims=fixed, progress=progress.stage)
    return result
