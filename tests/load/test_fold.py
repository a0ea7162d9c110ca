"""Shape arithmetic on static shapes: followed through by inference across the blocks of a network without the
symbolic step or a run."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import onnx

from onnxroof.load import load_graph
from onnxroof.load.infer import infer
from onnxroof.load.read import read_graph

_BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench_analyze.py"
_spec = importlib.util.spec_from_file_location("onnxroof_bench_analyze", _BENCH)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_a_legacy_swin_graph_is_inferred_without_the_symbolic_step():
    # Two window blocks of bench_analyze's legacy Swin export, the second shifted: each block's pads are computed
    # with Mod, which onnx's data propagation does not follow, so the second block's shapes depend on the first
    # block's folded values. The folding step follows them through in one walk: no node output is left unknown,
    # and neither symbolic inference nor a run is needed.
    model = bench.swin_like_model(blocks=2)
    copy = onnx.ModelProto.FromString(model.SerializeToString())
    inferred = infer(copy, read_graph(copy.graph))
    assert inferred.steps == ("onnx with data propagation", "shape arithmetic")
    graph = load_graph(model)
    assert [n.name for n in graph.nodes if any(graph.tensor(o).shape is None for o in n.outputs)] == []
    assert graph.tensors[graph.outputs[0]].shape == (1, 56, 56, 96)
