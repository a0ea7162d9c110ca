"""Benchmark: analysis wall time and peak memory, next to the floor of onnx.load + infer_shapes on the same file.

Prints one table. Each comparison is timed in a process of its own that alternates its sides run by run (the
floor, onnxroof's analysis alone, and the analysis with its table or its JSON written to a file as 'onnxroof
analyze --format table|json -o FILE' writes them; onnxroof and onnx-tool), so that a drift in the machine's speed
(a shared machine's neighbours come and go) slows all alike and the ratios stay fair, and so that no side runs
after a third that leaves a large heap behind; each time is the best of ``--repeat`` runs. Peak memory comes from
a fresh process per mode that runs it once, so that each peak RSS is its own. Goals: analysis, and analysis with
its table or its JSON, at most 2x the floor, time linear in node count, memory independent of weight bytes (the
generated graphs reference gigabytes of external weights that are not on disk), and at most half the time of
onnx-tool's model_profile on a real model with weights inline (compared when onnx-tool is installed).

usage: python tools/bench_analyze.py [--nodes 5000,25000,50000] [--zoo resnet50,vit_b_16] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onnx import ModelProto

ROOT = Path(__file__).resolve().parents[1]

_MEASURE = r"""
import json, sys, time
sys.path.insert(0, {root!r})
modes, path, repeat = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3])
import onnx

def runner(mode):
    if mode in ("ours", "ours_python", "ours_table", "ours_json"):
        import onnxroof.api, onnxroof.costs, onnxroof.load.native
        from onnxroof.cli.common import emit
        from onnxroof.report.analysis import render
        onnxroof.costs.registered_ops()
        reader = onnxroof.load.native.reader if mode != "ours_python" else None
        fmt = mode.partition("_")[2] if mode in ("ours_table", "ours_json") else None
        report = f"{{path}}.{{fmt}}"  # beside the model, in the folder the benchmark removes
        def run():
            onnxroof.load.native.reader = reader
            result = onnxroof.api.analyze(path, device="v100-sxm2")
            if fmt is not None:  # what 'onnxroof analyze --format FMT -o FILE' does after the analysis
                emit(render(result, fmt), report)
        return run
    if mode == "floor":
        return lambda: onnx.shape_inference.infer_shapes(onnx.load(path, load_external_data=False))
    import onnx_tool
    import contextlib, io
    def run():
        with contextlib.redirect_stdout(io.StringIO()):  # it prints its per-node table
            onnx_tool.model_profile(path)
    return run

runs = {{}}
for mode in modes:
    try:
        runs[mode] = runner(mode)
    except ImportError:
        pass
best = {{mode: float("inf") for mode in runs}}
for _ in range(repeat):
    for mode, run in runs.items():
        start = time.perf_counter()
        run()
        best[mode] = min(best[mode], time.perf_counter() - start)
# VmHWM is this process's own peak; ru_maxrss would carry the parent's peak across exec on Linux.
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({{"seconds": best, "peak_rss_mb": peak_kb / 1024}}))
"""


def measure(modes: list[str], path: Path, repeat: int) -> dict[str, Any] | None:
    """Best-of-``repeat`` seconds of each mode (run alternately in one fresh process; a mode that cannot be
    imported is left out) and that process's peak RSS; None when the process fails."""
    code = _MEASURE.format(root=str(ROOT))
    command = [sys.executable, "-c", code, ",".join(modes), str(path), str(repeat)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        return None
    return json.loads(result.stdout.strip().splitlines()[-1])


def chain_model(nodes: int, width: int = 256) -> tuple[ModelProto, int]:
    """A chain of MatMul -> Add -> Relu -> Mul blocks (4 nodes each) whose weights are external and absent, and
    the bytes of weights it references."""
    from onnx import TensorProto, helper

    def external(name: str, dims: list[int], offset: int) -> TensorProto:
        t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=dims)
        t.data_location = TensorProto.EXTERNAL
        length = 4
        for d in dims:
            length *= d
        for key, value in (("location", "absent.weights"), ("offset", str(offset)), ("length", str(length))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        return t

    inits, graph_nodes, prev, offset = [], [], "x", 0
    for i in range(nodes // 4):
        w, b, s = (
            external(f"w{i}", [width, width], offset),
            external(f"b{i}", [width], 0),
            external(f"s{i}", [width], 0),
        )
        offset += width * width * 4
        inits += [w, b, s]
        graph_nodes += [
            helper.make_node("MatMul", [prev, w.name], [f"m{i}"]),
            helper.make_node("Add", [f"m{i}", b.name], [f"a{i}"]),
            helper.make_node("Relu", [f"a{i}"], [f"r{i}"]),
            helper.make_node("Mul", [f"r{i}", s.name], [f"y{i}"]),
        ]
        prev = f"y{i}"
    graph = helper.make_graph(
        graph_nodes,
        f"chain{nodes}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, width])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), offset


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="5000,25000,50000", help="generated graph sizes (comma separated)")
    parser.add_argument("--zoo", default="resnet50,mobilenetv2,vit_b_16,unet", help="zoo models to time")
    parser.add_argument("--repeat", type=int, default=5, help="best of this many alternating runs per measurement")
    parser.add_argument("--no-onnx-tool", action="store_true", help="skip the onnx-tool comparison")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    import onnx

    import model_zoo
    from onnxroof.load import native

    with_native = native.reader is not None
    print(
        "graph reader: "
        + (
            "native (onnxroof.load._wire); 'py reader s' is onnxroof with the Python reader"
            if with_native
            else "Python only: the native reader is not built in this checkout ('pip install -e .' builds it in place)"
        )
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(v) for v in args.nodes.split(",") if v]:
            model, weight_bytes = chain_model(n)
            path = Path(tmp) / f"chain{n}.onnx"
            onnx.save(model, str(path))
            rows.append((f"chain {n} nodes", weight_bytes, path, False))
        # 4 blocks of [111804 x 111804] float weights: 200 GB referenced, none of it on disk.
        model, weight_bytes = chain_model(16, width=111_804)
        path = Path(tmp) / "chain200gb.onnx"
        onnx.save(model, str(path))
        rows.append(("chain 16 nodes, 200 GB", weight_bytes, path, False))
        for name in [v for v in args.zoo.split(",") if v]:
            path = Path(tmp) / f"{name}.onnx"
            model = model_zoo.build(name, weights=True)
            onnx.save(model, str(path))
            rows.append((f"zoo:{name} (inline)", path.stat().st_size, path, not args.no_onnx_tool))

        tool_missing = False
        print(
            f"{'model':<26} {'weights':>9} {'floor s':>9} {'ours s':>9} {'ratio':>6} {'+table':>7} {'+json':>6} "
            f"{'py reader s':>12} "
            f"{'floor MB':>9} {'ours MB':>8} {'onnx-tool s':>12} {'vs tool':>8}"
        )
        for label, weight_bytes, path, with_tool in rows:
            # Each comparison alternates its two modes in a process of its own: a mode that allocates much (the
            # Python reader, onnx-tool) leaves a heap that slows whatever runs next in the same process.
            times = measure(["floor", "ours", "ours_table", "ours_json"], path, args.repeat)
            python_times = measure(["ours_python"], path, args.repeat) if with_native else None
            tool_times = measure(["ours", "onnx_tool"], path, args.repeat) if with_tool else None
            floor_memory, ours_memory = measure(["floor"], path, 1), measure(["ours"], path, 1)
            if times is None or floor_memory is None or ours_memory is None:
                print(f"{label:<26} measurement failed")
                continue
            floor, ours = times["seconds"]["floor"], times["seconds"]["ours"]
            table, json_ = times["seconds"]["ours_table"], times["seconds"]["ours_json"]
            python = python_times["seconds"].get("ours_python") if python_times else None
            tool = tool_times["seconds"].get("onnx_tool") if tool_times else None
            versus = tool_times["seconds"]["ours"] / tool if tool_times and tool else None  # both from one process
            tool_text = f"{tool:.3f}" if tool else ("n/a" if with_tool else "-")
            versus_text = f"{versus:.2f}" if versus else "-"
            python_text = f"{python:.3f}" if python else "-"
            tool_missing = tool_missing or (with_tool and tool is None)
            print(
                f"{label:<26} {weight_bytes / 1e9:>7.2f}GB {floor:>9.3f} {ours:>9.3f} {ours / floor:>6.2f} "
                f"{table / floor:>7.2f} {json_ / floor:>6.2f} "
                f"{python_text:>12} {floor_memory['peak_rss_mb']:>9.0f} {ours_memory['peak_rss_mb']:>8.0f} "
                f"{tool_text:>12} {versus_text:>8}"
            )
    print(
        "\nfloor = onnx.load + onnx.shape_inference.infer_shapes; ours = onnxroof.analyze (load, inference, costs, "
        "roofline); ratio = ours / floor; +table, +json = (ours + rendering the table or the JSON and writing it to a "
        "file) / floor; each the best of --repeat runs, alternated in one process; py reader = "
        "onnxroof with the Python reader, in a process of its own; vs tool = onnxroof / onnx-tool, alternated in a "
        "third process; peak RSS of a fresh process running one."
    )
    if tool_missing:
        print("onnx-tool n/a: pip install onnx-tool to compare with its model_profile.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
