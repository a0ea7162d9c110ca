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

The generated rows include a legacy (TorchScript) Swin export's window blocks, 3,330 nodes of mostly shape
arithmetic on static shapes (``swin_like_model``). Last, the command as a user runs it: the wall time of the
process ``onnxroof analyze`` on a BERT-base with its weights inline (``bert_base_model``, 440 MB) against that of
a process running onnx-tool's ``model_profile`` on the same file, start-up and imports included, alternated run
by run (each once first, untimed, so that both start with their bytecode compiled and the file in the page
cache); the ratio's goal is at most 0.5. onnx-tool is a tools-only install: ``pip install onnx-tool``.

usage: python tools/bench_analyze.py [--nodes 5000,25000,50000] [--zoo resnet50,vit_b_16] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
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


def wall_times(commands: dict[str, list[str]], repeat: int) -> dict[str, float]:
    """Best-of-``repeat`` wall seconds of each command as a process of its own, the commands alternated run by run
    after one untimed run each; a command that fails is left out. Children run from the checkout's root (so that
    ``-m onnxroof`` is this checkout) with bytecode caching allowed, as an installed tool has its bytecode."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def run(command: list[str]) -> float | None:
        start = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - start if done.returncode == 0 else None

    working = {name: command for name, command in commands.items() if run(command) is not None}
    best = {name: float("inf") for name in working}
    for _ in range(repeat):
        for name, command in working.items():
            seconds = run(command)
            if seconds is not None:
                best[name] = min(best[name], seconds)
    return best


def cpu_model() -> str:
    """The CPU's model name as /proc/cpuinfo gives it (the platform's processor string elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        import platform

        return platform.processor() or "unknown"


_PROFILE = "import sys, onnx_tool; onnx_tool.model_profile(sys.argv[1])"  # onnx-tool's profile, as a process


def compare_commands(path: Path, repeat: int) -> None:
    """Print the wall time of ``onnxroof analyze`` on ``path`` against onnx-tool's model_profile, and the ratio."""
    times = wall_times(
        {
            "onnxroof": [sys.executable, "-m", "onnxroof", "analyze", str(path)],
            "onnx-tool": [sys.executable, "-c", _PROFILE, str(path)],
        },
        repeat,
    )
    ours, tool = times.get("onnxroof"), times.get("onnx-tool")
    size = path.stat().st_size / 1e6
    print(f"\nBERT-base, weights inline ({size:.0f} MB), a process each, best of {repeat}, on {cpu_model()}:")
    print(f"  onnxroof analyze          {ours:.3f} s" if ours else "  onnxroof analyze          failed")
    if tool is None:
        print("  onnx-tool model_profile   n/a (pip install onnx-tool)")
        return
    print(f"  onnx-tool model_profile   {tool:.3f} s")
    if ours:
        print(f"  ratio onnxroof / onnx-tool {ours / tool:.2f} (goal: at most 0.5)")


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


# -------------------------------------------------------------------------------------------------------------
# Generated models of two exporters' shapes: a legacy (TorchScript) export's window attention, whose shapes, pads
# and masks are computed in the graph from Shape outputs, and a BERT-base encoder with its weights inline.


class _Builder:
    """Nodes with fresh names, Constant nodes for small values, zero weights as initializers."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.count = 0

    def op(self, op_type: str, *inputs: str, **attrs: Any) -> str:
        from onnx import helper

        self.count += 1
        out = f"{op_type.lower()}_{self.count}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=f"/{op_type}_{self.count}", **attrs))
        return out

    def const(self, value: Any, dtype: Any = None) -> str:
        import numpy as np
        from onnx import helper, numpy_helper

        self.count += 1
        name = f"c{self.count}"
        array = np.array(value, dtype or np.int64)
        self.nodes.append(helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array)))
        return name

    def weight(self, shape: list[int], scale: float = 0.0) -> str:
        import numpy as np
        from onnx import numpy_helper

        name = f"w{len(self.initializers)}"
        rng = np.random.default_rng(len(self.initializers))
        values = (rng.standard_normal(shape, dtype=np.float32) * scale) if scale else np.zeros(shape, np.float32)
        self.initializers.append(numpy_helper.from_array(values, name))
        return name

    def dim(self, x: str, axis: int) -> str:
        """Gather(Shape(x), axis): a dim as the tracer records x.size(axis)."""
        return self.op("Gather", self.op("Shape", x), self.const(axis), axis=0)

    def shape_of(self, *scalars: str) -> str:
        """Concat of Unsqueezed scalars: a shape as the tracer records a tuple of sizes."""
        return self.op("Concat", *[self.op("Unsqueeze", s, self.const([0])) for s in scalars], axis=0)


def _window_block(b: _Builder, x: str, size: int, channels: int, heads: int, window: int, shift: int) -> str:
    """One block of torchvision's shifted window attention on x [1, size, size, C] as the legacy exporter writes
    it: the pads, window counts and reshape targets computed from Shape outputs (with Mod, which onnx's data
    propagation does not follow), the relative-position bias gathered from its table, and, in a shifted block,
    the attention mask built from Range, comparisons, ConstantOfShape, Expand, Where, Equal, Not and Tile."""
    import numpy as np
    from onnx import TensorProto, numpy_helper

    ws, zero = b.const(window), b.const(0)
    batch, height, width, chans = (b.dim(x, axis) for axis in range(4))
    pad_r = b.op("Mod", b.op("Sub", ws, b.op("Mod", width, ws)), ws)
    pad_b = b.op("Mod", b.op("Sub", ws, b.op("Mod", height, ws)), ws)
    pads = b.shape_of(zero, zero, zero, zero, zero, zero, zero, pad_r, zero, pad_b)
    pads = b.op("Cast", b.op("Reshape", pads, b.const([10])), to=TensorProto.INT64)
    x = b.op("Pad", x, b.op("Slice", pads, b.const([0]), b.const([8])))
    pad_h, pad_w = b.dim(x, 1), b.dim(x, 2)
    if shift:  # torch.roll: two slices and a concat
        x = b.op(
            "Concat",
            b.op("Slice", x, b.const([shift]), b.const([size]), b.const([1])),
            b.op("Slice", x, b.const([0]), b.const([shift]), b.const([1])),
            axis=1,
        )
    rows, cols = b.op("Div", pad_h, ws), b.op("Div", pad_w, ws)
    windows, tokens = b.op("Mul", rows, cols), b.op("Mul", ws, ws)
    x = b.op("Transpose", b.op("Reshape", x, b.shape_of(batch, rows, ws, cols, ws, chans)), perm=[0, 1, 3, 2, 4, 5])
    x = b.op("Reshape", x, b.shape_of(b.op("Mul", batch, windows), tokens, chans))
    qkv = b.op("Add", b.op("MatMul", x, b.weight([channels, 3 * channels])), b.weight([3 * channels]))
    head_dim = b.op("Div", chans, b.const(heads))
    qkv = b.op("Reshape", qkv, b.shape_of(b.dim(x, 0), b.dim(x, 1), b.const(3), b.const(heads), head_dim))
    q, k, v = (b.op("Gather", b.op("Transpose", qkv, perm=[2, 0, 3, 1, 4]), b.const(i), axis=0) for i in range(3))
    scale = b.op("Pow", b.op("Cast", head_dim, to=TensorProto.FLOAT), b.const(-0.5, np.float32))
    attn = b.op("MatMul", b.op("Mul", q, scale), b.op("Transpose", k, perm=[0, 1, 3, 2]))
    bias = b.op("Gather", b.weight([(2 * window - 1) ** 2, heads]), b.const(np.zeros(window**4, np.int64)), axis=0)
    bias = b.op("Reshape", bias, b.const([window * window, window * window, heads]))
    attn = b.op("Add", attn, b.op("Unsqueeze", b.op("Transpose", bias, perm=[2, 0, 1]), b.const([0])))
    if shift:
        zeros = numpy_helper.from_array(np.zeros(1, np.float32))
        mask = b.op("ConstantOfShape", b.shape_of(pad_h, pad_w), value=zeros)
        row_ids, col_ids = (b.op("Range", zero, n, b.const(1)) for n in (pad_h, pad_w))
        edges = (b.op("Sub", pad_h, ws), b.op("Sub", pad_h, b.const(shift)))
        bounds = [(zero, edges[0]), (edges[0], edges[1]), (edges[1], pad_h)]
        for i, (h0, h1) in enumerate(bounds):
            in_h = b.op("And", b.op("GreaterOrEqual", row_ids, h0), b.op("Less", row_ids, h1))
            for j, (w0, w1) in enumerate(bounds):
                in_w = b.op("And", b.op("GreaterOrEqual", col_ids, w0), b.op("Less", col_ids, w1))
                cell = b.op("And", b.op("Unsqueeze", in_h, b.const([1])), b.op("Unsqueeze", in_w, b.const([0])))
                count = b.op("Expand", b.const(float(3 * i + j), np.float32), b.op("Shape", mask))
                mask = b.op("Where", cell, count, mask)
        mask = b.op("Transpose", b.op("Reshape", mask, b.shape_of(rows, ws, cols, ws)), perm=[0, 2, 1, 3])
        mask = b.op("Reshape", mask, b.shape_of(windows, tokens))
        mask = b.op("Sub", b.op("Unsqueeze", mask, b.const([1])), b.op("Unsqueeze", mask, b.const([2])))
        apart = b.op("Not", b.op("Equal", mask, b.const(0.0, np.float32)))
        mask = b.op("Where", apart, b.const(-100.0, np.float32), mask)
        mask = b.op("Tile", b.op("Unsqueeze", mask, b.const([0, 2])), b.const([1, 1, 1, 1, 1]))
        groups = b.op("Div", b.dim(x, 0), windows)
        attn = b.op("Reshape", attn, b.shape_of(groups, windows, b.const(heads), tokens, tokens))
        attn = b.op("Add", attn, mask)
        attn = b.op("Reshape", attn, b.shape_of(b.const(-1), b.const(heads), tokens, tokens))
    y = b.op("Transpose", b.op("MatMul", b.op("Softmax", attn, axis=-1), v), perm=[0, 2, 1, 3])
    y = b.op("Reshape", y, b.shape_of(b.dim(x, 0), b.dim(x, 1), chans))
    y = b.op("Add", b.op("MatMul", y, b.weight([channels, channels])), b.weight([channels]))
    y = b.op("Reshape", y, b.shape_of(batch, rows, cols, ws, ws, chans))
    y = b.op("Reshape", b.op("Transpose", y, perm=[0, 1, 3, 2, 4, 5]), b.shape_of(batch, pad_h, pad_w, chans))
    if shift:
        y = b.op(
            "Concat",
            b.op("Slice", y, b.const([size - shift]), b.const([size]), b.const([1])),
            b.op("Slice", y, b.const([0]), b.const([size - shift]), b.const([1])),
            axis=1,
        )
    return y


def swin_like_model(
    blocks: int = 12, size: int = 56, channels: int = 96, heads: int = 3, window: int = 7
) -> ModelProto:
    """``blocks`` window-attention blocks of a legacy Swin export (every other one shifted) on a [1, 56, 56, 96]
    input: about 280 nodes a block, most of them shape arithmetic on static shapes, as in a legacy Swin-T export's
    3,493 nodes (12 blocks: 3,330)."""
    from onnx import TensorProto, helper

    b = _Builder()
    x = "x"
    for i in range(blocks):
        x = _window_block(b, x, size, channels, heads, window, shift=window // 2 if i % 2 else 0)
    shape = [1, size, size, channels]
    graph = helper.make_graph(
        b.nodes,
        f"swin_like{blocks}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, shape)],
        b.initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _layer_norm(b: _Builder, x: str, hidden: int) -> str:
    """LayerNormalization over the last axis as an exporter writes it before opset 17: 9 nodes."""
    import numpy as np

    mean = b.op("ReduceMean", x, axes=[-1])
    centred = b.op("Sub", x, mean)
    variance = b.op("ReduceMean", b.op("Pow", centred, b.const(2.0, np.float32)), axes=[-1])
    std = b.op("Sqrt", b.op("Add", variance, b.const(1e-12, np.float32)))
    normed = b.op("Div", centred, std)
    return b.op("Add", b.op("Mul", normed, b.weight([hidden], 1.0)), b.weight([hidden], 0.02))


def _dense(b: _Builder, x: str, rows: int, cols: int) -> str:
    return b.op("Add", b.op("MatMul", x, b.weight([rows, cols], 0.02)), b.weight([cols], 0.02))


def _heads(b: _Builder, x: str, heads: int, head_dim: int) -> str:
    """[1, T, H*D] -> [1, H, T, D], the view's target taken from x.size()[:-1] as the tracer records it."""
    leading = b.op("Slice", b.op("Shape", x), b.const([0]), b.const([2]))
    target = b.op("Concat", leading, b.const([heads, head_dim]), axis=0)
    return b.op("Transpose", b.op("Reshape", x, target), perm=[0, 2, 1, 3])


def bert_base_model(layers: int = 12, tokens: int = 128, hidden: int = 768, heads: int = 12) -> ModelProto:
    """A BERT-base encoder (Hugging Face's, as the legacy exporter writes it at opset 14) with its weights inline:
    embeddings, ``layers`` layers of self-attention and a 4x feed-forward with an erf GELU, each LayerNorm
    decomposed, and the pooler; random weights (110 M of them, 440 MB)."""
    import numpy as np
    from onnx import TensorProto, helper

    b = _Builder()
    ids, types, mask = "input_ids", "token_type_ids", "attention_mask"
    positions = b.op(
        "Slice", b.const(np.arange(512, dtype=np.int64).reshape(1, 512)), b.const([0]), b.const([tokens]), b.const([1])
    )
    x = b.op("Gather", b.weight([30522, hidden], 0.02), ids, axis=0)
    x = b.op("Add", x, b.op("Gather", b.weight([2, hidden], 0.02), types, axis=0))
    x = _layer_norm(b, b.op("Add", x, b.op("Gather", b.weight([512, hidden], 0.02), positions, axis=0)), hidden)
    extended = b.op("Cast", b.op("Unsqueeze", mask, b.const([1, 2])), to=TensorProto.FLOAT)
    extended = b.op("Mul", b.op("Sub", b.const(1.0, np.float32), extended), b.const(-10000.0, np.float32))
    head_dim = hidden // heads
    for _ in range(layers):
        q, k, v = (_heads(b, _dense(b, x, hidden, hidden), heads, head_dim) for _ in range(3))
        scores = b.op("MatMul", q, b.op("Transpose", k, perm=[0, 1, 3, 2]))
        scores = b.op("Add", b.op("Div", scores, b.const(float(head_dim) ** 0.5, np.float32)), extended)
        context = b.op("Transpose", b.op("MatMul", b.op("Softmax", scores, axis=-1), v), perm=[0, 2, 1, 3])
        leading = b.op("Slice", b.op("Shape", context), b.const([0]), b.const([2]))
        context = b.op("Reshape", context, b.op("Concat", leading, b.const([hidden]), axis=0))
        x = _layer_norm(b, b.op("Add", _dense(b, context, hidden, hidden), x), hidden)
        h = _dense(b, x, hidden, 4 * hidden)
        erf = b.op("Erf", b.op("Div", h, b.const(2.0**0.5, np.float32)))
        h = b.op("Mul", b.op("Mul", h, b.op("Add", erf, b.const(1.0, np.float32))), b.const(0.5, np.float32))
        x = _layer_norm(b, b.op("Add", _dense(b, h, 4 * hidden, hidden), x), hidden)
    pooled = b.op("Tanh", _dense(b, b.op("Gather", x, b.const(0), axis=1), hidden, hidden))
    graph = helper.make_graph(
        b.nodes,
        "bert_base",
        [helper.make_tensor_value_info(name, TensorProto.INT64, [1, tokens]) for name in (ids, types, mask)],
        [
            helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, tokens, hidden]),
            helper.make_tensor_value_info(pooled, TensorProto.FLOAT, [1, hidden]),
        ],
        b.initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


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
        path = Path(tmp) / "swin_like.onnx"
        onnx.save(swin_like_model(), str(path))
        rows.append(("legacy Swin blocks, 3330 n", path.stat().st_size, path, False))
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
            "roofline); ratio = ours / floor; +table, +json = (ours + rendering the table or the JSON and writing it "
            "to a file) / floor; each the best of --repeat runs, alternated in one process; py reader = onnxroof with "
            "the Python reader, in a process of its own; vs tool = onnxroof / onnx-tool, alternated in a third "
            "process; peak RSS of a fresh process running one."
        )
        if tool_missing:
            print("onnx-tool n/a: pip install onnx-tool to compare with its model_profile.")
        if not args.no_onnx_tool:
            path = Path(tmp) / "bert_base.onnx"
            onnx.save(bert_base_model(), str(path))
            compare_commands(path, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
