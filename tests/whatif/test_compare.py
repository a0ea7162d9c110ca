"""compare: layers matched by name, by the prefix a rewrite gives what it makes, then by position; the rules for
whether a predicted speedup got the direction and the size of the measured one."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.api import analyze
from onnxroof.whatif.compare import compare, direction_agrees, match_layers, size_agrees


def _model(nodes: list[onnx.NodeProto], weights: dict[str, tuple[int, ...]]) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.ones(shape, np.float32), name) for name, shape in weights.items()]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 16, 16])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


STANDARD = _model(
    [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
    ],
    {"w": (16, 8, 3, 3)},
)
SEPARABLE = _model(
    [
        helper.make_node("Conv", ["x", "dw"], ["d"], name="conv1.depthwise", pads=[1, 1, 1, 1], group=8),
        helper.make_node("Conv", ["d", "pw"], ["c"], name="conv1.pointwise"),
        helper.make_node("Relu", ["c"], ["y"], name="activation"),
    ],
    {"dw": (8, 1, 3, 3), "pw": (16, 8, 1, 1)},
)


def test_layers_match_by_prefix_then_by_position() -> None:
    a, b = analyze(STANDARD), analyze(SEPARABLE)
    layers = match_layers(a.nodes, b.nodes)
    assert [(d.a, d.b, d.matched_by) for d in layers] == [
        (("conv1",), ("conv1.depthwise", "conv1.pointwise"), "prefix"),
        (("relu",), ("activation",), "position"),
    ]
    conv = layers[0]
    # Standard: 2*MACs = 2 * (16*16 outputs * 16 channels) * (8*3*3) = 589824. Separable without bias:
    # depthwise 2 * 16*16*8 * 9 = 36864 plus pointwise 2 * 16*16*16 * 8 = 65536, 102400 in all.
    assert (conv.flops_a, conv.flops_b) == (589824, 102400)


def test_a_layer_with_no_counterpart_is_listed_on_its_side() -> None:
    only_relu = _model([helper.make_node("Relu", ["x"], ["y"], name="relu")], {})
    only_relu.graph.output[0].type.tensor_type.shape.dim[1].dim_value = 8
    layers = match_layers(analyze(STANDARD).nodes, analyze(only_relu).nodes)
    assert [(d.a, d.b, d.matched_by) for d in layers] == [(("conv1",), (), "only-a"), (("relu",), ("relu",), "name")]


def test_compare_gives_the_speedup_per_device() -> None:
    result = compare(STANDARD, SEPARABLE, ["v100-sxm2", "gtx940mx"])
    assert [d.device for d in result.devices] == ["v100-sxm2", "gtx940mx"]
    for d in result.devices:
        assert d.speedup == pytest.approx(d.time_a_s / d.time_b_s)
    assert (result.a.flops, result.b.flops) == (589824 + 16 * 16 * 16, 102400 + 16 * 16 * 16)  # + one op per Relu


@pytest.mark.parametrize(
    ("predicted", "measured", "direction", "size"),
    [
        (1.5, 1.4, True, True),  # both faster, 7% apart
        (1.5, 1.1, True, False),  # both faster, 36% apart
        (1.2, 0.8, False, False),  # predicted faster, measured slower
        (0.5, 0.45, True, True),  # both slower
        (1.05, 1.01, True, True),  # measured change within noise, prediction near 1
        (1.3, 1.01, False, False),  # measured no change, predicted 30% faster
    ],
)
def test_agreement_rules(predicted: float, measured: float, direction: bool, size: bool) -> None:
    assert direction_agrees(predicted, measured) is direction
    assert size_agrees(predicted, measured) is size


@pytest.mark.ort
def test_time_pair_feeds_both_models_from_the_inputs_file(tmp_path, monkeypatch) -> None:
    from onnxroof.errors import UserError
    from onnxroof.ort import measure as measure_module
    from onnxroof.whatif.compare import time_pair
    from tests.helpers import tiny_model

    given = np.full((4, 8), 3.0, np.float32)
    npz = tmp_path / "x.npz"
    np.savez(npz, x=given)
    seen: list = []
    real = measure_module.measure

    def recording(model, session, **kwargs):
        seen.append(kwargs["feeds"])
        return real(model, session, **kwargs)

    monkeypatch.setattr(measure_module, "measure", recording)
    a, b = time_pair(tiny_model(), tiny_model(), repeat=3, rounds=1, feeds_path=npz)
    assert a > 0 and b > 0
    assert len(seen) == 2 and all(np.array_equal(f["x"], given) for f in seen)
    with pytest.raises(UserError, match="has shape 4x8, the model wants 2x8"):
        time_pair(tiny_model(), tiny_model((2, 8)), repeat=3, rounds=1, feeds_path=npz)
