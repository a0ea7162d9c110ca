"""onnxroof fit: does a model fit a device's memory and latency budget; the largest batch; the best device."""

from __future__ import annotations

import argparse

from onnxroof.cli.common import (
    Progress,
    add_devices_option,
    add_output_options,
    check_output_option,
    emit,
    resolve_devices,
    split_list,
)
from onnxroof.errors import UserError

HELP = "deploy-time check: memory and latency budgets, the largest batch, the best device (exit 1 on a miss)"
DESCRIPTION = """Check a model against a device's memory and a latency budget, as a deployment (or a CI job) asks
before it ships. Latency is the predicted time; memory is weights plus the peak of live activations over the
execution order (onnxruntime's order on --device host). The memory budget defaults to the device's memory
capacity. Budgets are written with their unit, and each check is shown in the unit its budget was written in:
--latency-budget 10ms, 2.5s or 500us; --memory-budget 4GiB (4 x 2^30 bytes), 4GB (4 x 10^9), 512MiB. A bare number
is refused (10 could be seconds where milliseconds were meant, a CI gate that never fails), and so is a prefix
alone (4G: GB or GiB?). One summary line says PASS or FAIL with the numbers. --training checks a training step
instead: forward, backward (about twice the forward for convolutions and matrix products) and the optimizer
update, with memory for weights, gradients, optimizer state and the activations kept for backward.

For a decoder LLM with a KV cache, --context N checks it serving --batch sequences at a context of N tokens
(prompt and generated together): --latency-budget is the time per output token (the decode step whose cache ends
at N rows), --ttft-budget the time to first token of an N-token prompt, memory the weights (at their stored bit
width), the KV cache of N rows a sequence (in its dtype, or --kv-dtype fp16, int8, int4 for its memory) and the
activations. --max-batch with --context finds the largest batch at that context; --max-context the longest
context at --batch (up to the positions the graph's rotary tables hold), each naming the budget that stops it.
--tensor-parallel N splits it over N GPUs of the device as Megatron-LM does: times and memory are one GPU's,
its all-reduces over the device's NVLink or PCIe included.

Exit codes: 0 when every check passes, 1 when one fails, 2 for bad input (an unknown device, a budget that does
not parse, a batch the model cannot take).

examples:
  onnxroof fit model.onnx --device t4 --batch 8 --latency-budget 10ms --memory-budget 4GiB
  onnxroof fit zoo:resnet50 --device a100-sxm4-80gb --precision fp16 --max-batch --latency-budget 20ms
  onnxroof fit zoo:resnet50 --all-devices --latency-budget 5ms --format json
  onnxroof fit zoo:resnet50 --device v100-sxm2 --batch 32 --training --optimizer adam --mixed-precision
  onnxroof fit zoo:llama-3-8b-fp16 -d a100-sxm4-80gb --context 8192 --batch 4 --latency-budget 30ms
  onnxroof fit zoo:llama-3-8b-int4 -d l4 --max-context --batch 8 --kv-dtype int8
  onnxroof fit zoo:llama-3-8b-fp16 -d l4 --tensor-parallel 2 --max-batch --context 4096
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="an .onnx file or zoo:NAME")
    add_devices_option(parser, "device(s), repeatable or comma-separated")
    parser.add_argument("--all-devices", action="store_true", help="rank every catalog device")
    parser.add_argument("--batch", type=int, default=None, metavar="N", help="the batch size (default: the model's)")
    parser.add_argument("-p", "--precision", default=None, help="what if every float tensor were P (fp32, fp16, ...)")
    parser.add_argument("--latency-budget", default=None, metavar="T", help="with its unit: 10ms, 2.5s, 500us")
    parser.add_argument(
        "--memory-budget",
        default=None,
        metavar="M",
        help="with its unit: 4GiB, 4GB, 512MiB (default: the device's memory)",
    )
    parser.add_argument("--max-batch", action="store_true", help="find the largest batch within the budgets")
    parser.add_argument(
        "--training",
        action="store_true",
        help="check a training step (forward + backward + optimizer update) instead of inference",
    )
    parser.add_argument(
        "--optimizer", default="adam", choices=("sgd", "momentum", "adam"), help="--training: its state [adam]"
    )
    parser.add_argument(
        "--mixed-precision", action="store_true", help="--training: fp16 compute, fp32 master weights and state"
    )
    decoder = parser.add_argument_group("decoders (a graph with a KV cache)")
    decoder.add_argument(
        "--context", type=int, default=None, metavar="N", help="tokens held a sequence (prompt + generated)"
    )
    decoder.add_argument("--max-context", action="store_true", help="find the longest context at --batch")
    decoder.add_argument(
        "--kv-dtype",
        default=None,
        metavar="DTYPE",
        help="the KV cache's dtype for its memory, e.g. int8 (default: the graph's)",
    )
    decoder.add_argument("--ttft-budget", default=None, metavar="T", help="time to first token of a --context prompt")
    decoder.add_argument(
        "--shared-buffer", action="store_true", help="past and present share one buffer (GroupQueryAttention)"
    )
    decoder.add_argument(
        "--tensor-parallel",
        type=int,
        default=None,
        metavar="N",
        help="split the model over N GPUs of the device; times and memory are one GPU's (default 1)",
    )
    parser.add_argument("--threads", type=int, default=1, metavar="N", help="--device host: calibration threads")
    parser.add_argument("-f", "--format", default="table", choices=("table", "json"), help="output format")
    add_output_options(parser)


def run(args: argparse.Namespace) -> int:
    from onnxroof.api import DEFAULT_DEVICE
    from onnxroof.devices import catalog
    from onnxroof.report.fit import render_fit, render_max_batch, render_ranking
    from onnxroof.report.format import output_width
    from onnxroof.units import parse_bytes, parse_seconds
    from onnxroof.whatif.fit import Training, fit, max_batch, rank_devices

    check_output_option(args)
    if args.batch is not None and args.batch < 1:
        raise UserError(f"--batch {args.batch}: a batch is at least 1", "e.g. --batch 8")
    if _decoder_request(args):
        return _run_decoder(args)
    latency = parse_seconds(args.latency_budget) if args.latency_budget else None
    memory = parse_bytes(args.memory_budget) if args.memory_budget else None
    devices = list(catalog()) if args.all_devices else split_list(args.device) or [DEFAULT_DEVICE]
    precision, threads = args.precision, args.threads
    training = Training(args.optimizer, args.mixed_precision) if args.training else None
    ranking = len(devices) > 1
    progress = Progress("fitting", unit="devices" if ranking else "fits")
    try:
        targets = resolve_devices(devices, threads, progress)  # host calibrated first where needed
        from onnxroof.predict.profiles import reads_host_memory

        if training is None and any(reads_host_memory(t) for t in targets):
            from onnxroof.ort.memory_calibration import host_memory_factors

            progress.stage("reading this host's session memory factors (measured once)")
            host_memory_factors(threads, progress=progress.stage)
        if ranking:
            ranked = rank_devices(
                args.model,
                devices,
                batch=args.batch,
                precision=precision,
                latency_budget=latency,
                memory_budget=memory,
                threads=threads,
                training=training,
                progress=progress,
            )
            emit(render_ranking(ranked, args.format, width=output_width(args.output)), args.output)
            return 0 if any(d.fit.passed for d in ranked) else 1
        if args.max_batch:
            largest = max_batch(
                args.model,
                devices[0],
                precision=precision,
                latency_budget=latency,
                memory_budget=memory,
                threads=threads,
                training=training,
                progress=progress,
            )
            emit(render_max_batch(largest, devices[0], args.format, width=output_width(args.output)), args.output)
            return 0 if largest.batch > 0 else 1
        progress.stage(f"predicting on {devices[0]}")
        result = fit(
            args.model,
            devices[0],
            batch=args.batch,
            precision=precision,
            latency_budget=latency,
            memory_budget=memory,
            threads=threads,
            training=training,
        )
    finally:
        progress.close()
    emit(render_fit(result, args.format, width=output_width(args.output)), args.output)
    return 0 if result.passed else 1


_DECODER_ONLY = {
    "--kv-dtype": "kv_dtype",
    "--ttft-budget": "ttft_budget",
    "--shared-buffer": "shared_buffer",
    "--tensor-parallel": "tensor_parallel",
}
_NOT_FOR_DECODERS = {"--training": "training", "--precision": "precision", "--all-devices": "all_devices"}


def _decoder_request(args: argparse.Namespace) -> bool:
    """Whether the options ask for a decoder fit; options of one kind given to the other are refused."""
    wanted = args.context is not None or args.max_context
    if not wanted:
        given = [flag for flag, key in _DECODER_ONLY.items() if getattr(args, key)]
        if given:
            raise UserError(f"{given[0]} is for decoders", "add --context N or --max-context")
        return False
    clash = [flag for flag, key in _NOT_FOR_DECODERS.items() if getattr(args, key)]
    if clash:
        raise UserError(f"{clash[0]} does not apply to a decoder fit (--context, --max-context)", f"drop {clash[0]}")
    if args.max_context and (args.context is not None or args.max_batch):
        raise UserError(
            "--max-context searches the context at a fixed --batch", "drop --context and --max-batch, or --max-context"
        )
    if len(split_list(args.device)) > 1:
        raise UserError("a decoder fit takes one --device", "give one device")
    return True


def _run_decoder(args: argparse.Namespace) -> int:
    from onnxroof.api import DEFAULT_DEVICE
    from onnxroof.load.read import read_model
    from onnxroof.report.decoder_fit import render_decoder_fit, render_largest_decoder
    from onnxroof.report.format import output_width
    from onnxroof.units import parse_bytes, parse_seconds
    from onnxroof.whatif.decoder_fit import DecoderBudgets, fit_decoder, largest_decoder

    budgets = DecoderBudgets(
        per_token=parse_seconds(args.latency_budget) if args.latency_budget else None,
        first_token=parse_seconds(args.ttft_budget, "a time-to-first-token budget") if args.ttft_budget else None,
        memory=parse_bytes(args.memory_budget) if args.memory_budget else None,
        kv_dtype=args.kv_dtype,
    )
    options = {"budgets": budgets, "shared_buffer": args.shared_buffer, "tensor_parallel": args.tensor_parallel or 1}
    width = output_width(args.output)
    progress = Progress("fitting")
    try:
        (device,) = resolve_devices(split_list(args.device) or [DEFAULT_DEVICE], args.threads, progress)
        progress.stage("reading the model")
        model, name = read_model(args.model, weight_bytes=False)
        options["name"] = name
        if args.max_context or args.max_batch:
            vary = "context" if args.max_context else "batch"
            found = largest_decoder(
                model,
                device,
                vary=vary,
                context=args.context or 1,
                batch=args.batch or 1,
                progress=progress.stage,
                **options,
            )
            emit(render_largest_decoder(found, args.format, width=width), args.output)
            return 0 if found.value > 0 else 1
        progress.stage(f"predicting on {device.key}")
        result = fit_decoder(model, device, context=args.context, batch=args.batch or 1, **options)
    finally:
        progress.close()
    emit(render_decoder_fit(result, args.format, width=width), args.output)
    return 0 if result.passed else 1
