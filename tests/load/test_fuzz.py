"""Mutated models are bad input, never an internal error.

A few small models are serialized and mutated with a fixed seed: bits and bytes changed at random offsets of the
file, truncations, and structured edits of the graph (a dim of an input, output or value_info, an attribute value
changed or an attribute set, a node input renamed). ``onnxroof analyze`` on each copy either gives an analysis
(exit 0) or one line on stderr, "onnxroof: error: ... (hint: ...)", and exit 2: never exit 1, never a traceback.
A failure names the model, the seed and the mutation, so it reproduces.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
import onnx
import pytest
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from onnxroof.cli import main
from tests.helpers import IR_VERSION, small_conv_net

FLOAT = TensorProto.FLOAT


def _model(nodes: list, name: str, inputs: list, outputs: list, inits: list) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


def _weight(rng: np.random.Generator, name: str, *shape: int) -> TensorProto:
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


def matmul_add_concat() -> onnx.ModelProto:
    """x[2,8] @ w[8,16] + b[16], concatenated with y[2,4] on axis 1: [2,20]."""
    rng = np.random.default_rng(1)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
        helper.make_node("Add", ["m", "b"], ["a"], name="add"),
        helper.make_node("Concat", ["a", "y"], ["z"], axis=1, name="concat"),
    ]
    inputs = [helper.make_tensor_value_info("x", FLOAT, [2, 8]), helper.make_tensor_value_info("y", FLOAT, [2, 4])]
    outputs = [helper.make_tensor_value_info("z", FLOAT, [2, 20])]
    return _model(nodes, "matmul_add_concat", inputs, outputs, [_weight(rng, "w", 8, 16), _weight(rng, "b", 16)])


def reshape_transpose_gather() -> onnx.ModelProto:
    """x[2,3,4] reshaped to [2,12], transposed to [12,2], rows 0 and 5 gathered: [2,2]; then split in two."""
    inits = [
        numpy_helper.from_array(np.array([2, 12], np.int64), "target"),
        numpy_helper.from_array(np.array([0, 5], np.int64), "rows"),
        numpy_helper.from_array(np.array([1, 1], np.int64), "halves"),
    ]
    nodes = [
        helper.make_node("Reshape", ["x", "target"], ["r"], name="reshape"),
        helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0], name="transpose"),
        helper.make_node("Gather", ["t", "rows"], ["g"], axis=0, name="gather"),
        helper.make_node("Split", ["g", "halves"], ["s0", "s1"], axis=1, name="split"),
    ]
    inputs = [helper.make_tensor_value_info("x", FLOAT, [2, 3, 4])]
    outputs = [helper.make_tensor_value_info(n, FLOAT, [2, 1]) for n in ("s0", "s1")]
    return _model(nodes, "reshape_transpose_gather", inputs, outputs, inits)


def tiny_attention() -> onnx.ModelProto:
    """One head of self-attention on x[1,4,8]: softmax(q k^T / sqrt(8)) v, then a residual add."""
    rng = np.random.default_rng(2)
    inits = [_weight(rng, n, 8, 8) for n in ("wq", "wk", "wv")]
    inits.append(numpy_helper.from_array(np.array(8**0.5, np.float32), "scale"))
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"], name="q_proj"),
        helper.make_node("MatMul", ["x", "wk"], ["k"], name="k_proj"),
        helper.make_node("MatMul", ["x", "wv"], ["v"], name="v_proj"),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1], name="k_transpose"),
        helper.make_node("MatMul", ["q", "kt"], ["scores"], name="scores"),
        helper.make_node("Div", ["scores", "scale"], ["scaled"], name="scale"),
        helper.make_node("Softmax", ["scaled"], ["p"], axis=-1, name="softmax"),
        helper.make_node("MatMul", ["p", "v"], ["o"], name="context"),
        helper.make_node("Add", ["o", "x"], ["y"], name="residual"),
    ]
    inputs = [helper.make_tensor_value_info("x", FLOAT, [1, 4, 8])]
    outputs = [helper.make_tensor_value_info("y", FLOAT, [1, 4, 8])]
    return _model(nodes, "tiny_attention", inputs, outputs, inits)


def conv_net() -> onnx.ModelProto:
    return small_conv_net()


MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "conv_net": conv_net,
    "matmul_add_concat": matmul_add_concat,
    "reshape_transpose_gather": reshape_transpose_gather,
    "tiny_attention": tiny_attention,
}


def with_value_info(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with every intermediate tensor's type recorded, as exporters write them: the structured
    mutations then have value_info to contradict."""
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


# -------------------------------------------------------------------------------------------------------------
# Mutations


class Mutation(NamedTuple):
    """A mutated copy of a model and what was done to it (enough to do it again)."""

    what: str
    data: bytes


def byte_mutations(data: bytes, rng: np.random.Generator) -> Mutation:
    """One bit flipped, one byte replaced, or the file cut short, at a random offset."""
    kind = rng.integers(3)
    offset = int(rng.integers(len(data)))
    if kind == 0:
        bit = int(rng.integers(8))
        mutated = bytearray(data)
        mutated[offset] ^= 1 << bit
        return Mutation(f"bit {bit} flipped at offset {offset}", bytes(mutated))
    if kind == 1:
        value = int(rng.integers(256))
        mutated = bytearray(data)
        mutated[offset] = value
        return Mutation(f"byte at offset {offset} set to {value}", bytes(mutated))
    return Mutation(f"truncated at offset {offset}", data[:offset])


# Values a structured mutation writes: small, zero, negative, off by one from the models' own sizes, large.
DIM_VALUES = (0, 1, 2, 3, 5, 7, 12, 29, -1, -3, 1 << 20)
ATTRIBUTE_VALUES = (-4, -2, -1, 0, 1, 2, 3, 5, 9)


# Attributes a structured mutation sets on a node, whether its op reads them or not: ints, or lists of ints.
INT_ATTRIBUTES = ("axis", "group", "transA", "transB", "keepdims", "allowzero")
INTS_ATTRIBUTES = ("strides", "dilations", "kernel_shape", "pads", "perm", "split")


def _random_value(rng: np.random.Generator) -> int:
    return int(ATTRIBUTE_VALUES[int(rng.integers(len(ATTRIBUTE_VALUES)))])


def structured_mutation(model: onnx.ModelProto, rng: np.random.Generator) -> Mutation:
    """One edit of the graph: a dim of an input, output or value_info; one value of an int or ints attribute; an
    attribute set on a node (added, or replacing its own); or a node input renamed to another tensor of the graph
    or to a name nothing produces."""
    mutated = onnx.ModelProto()
    mutated.CopyFrom(model)
    graph = mutated.graph
    kind = rng.integers(4)
    if kind == 3:
        node = graph.node[int(rng.integers(len(graph.node)))]
        names = INT_ATTRIBUTES + INTS_ATTRIBUTES
        name = names[int(rng.integers(len(names)))]
        value: int | list[int] = (
            _random_value(rng)
            if name in INT_ATTRIBUTES
            else [_random_value(rng) for _ in range(int(rng.integers(1, 5)))]
        )
        kept = [a for a in node.attribute if a.name != name]
        del node.attribute[:]
        node.attribute.extend([*kept, helper.make_attribute(name, value)])
        return Mutation(f"{node.name}.{name} set to {value}", mutated.SerializeToString())
    if kind == 0:
        infos = [*graph.input, *graph.value_info, *graph.output]
        info = infos[int(rng.integers(len(infos)))]
        dims = info.type.tensor_type.shape.dim
        if dims:
            axis = int(rng.integers(len(dims)))
            dim = int(DIM_VALUES[int(rng.integers(len(DIM_VALUES)))])
            dims[axis].dim_value = dim
            return Mutation(f"dim {axis} of {info.name} set to {dim}", mutated.SerializeToString())
    if kind <= 1:
        attributes = [
            (node, a)
            for node in graph.node
            for a in node.attribute
            if a.type in (AttributeProto.INT, AttributeProto.INTS)
        ]
        if attributes:
            node, attribute = attributes[int(rng.integers(len(attributes)))]
            number = _random_value(rng)
            if attribute.type == AttributeProto.INT:
                attribute.i = number
                where = ""
            else:
                index = int(rng.integers(len(attribute.ints))) if attribute.ints else 0
                if attribute.ints:
                    attribute.ints[index] = number
                else:
                    attribute.ints.append(number)
                where = f"[{index}]"
            return Mutation(f"{node.name}.{attribute.name}{where} set to {number}", mutated.SerializeToString())
    names = sorted({n for node in graph.node for n in [*node.input, *node.output]} | {i.name for i in graph.input})
    node = graph.node[int(rng.integers(len(graph.node)))]
    index = int(rng.integers(len(node.input)))
    choice = int(rng.integers(len(names) + 1))
    name = names[choice] if choice < len(names) else "nothing_makes_this"
    node.input[index] = name
    return Mutation(f"{node.name}.input[{index}] renamed to {name}", mutated.SerializeToString())


def mutations(model: onnx.ModelProto, seed: int, count: int) -> Iterator[Mutation]:
    """``count`` mutated copies of ``model``, from ``seed``: half byte-level, of the model with every tensor typed,
    and half structured, of the model as built or typed (a contradiction that value_info does not cover reaches
    the cost functions; one that it does reaches shape inference)."""
    rng = np.random.default_rng(seed)
    typed = with_value_info(model)
    data = typed.SerializeToString()
    for _ in range(count):
        if rng.integers(2):
            yield byte_mutations(data, rng)
        elif rng.integers(2):
            what, mutated = structured_mutation(typed, rng)
            yield Mutation(f"typed model: {what}", mutated)
        else:
            what, mutated = structured_mutation(model, rng)
            yield Mutation(f"model as built: {what}", mutated)


# -------------------------------------------------------------------------------------------------------------
# The check


def misbehaviour(path: Path, capsys: pytest.CaptureFixture[str]) -> str | None:
    """What is wrong with how ``onnxroof analyze`` treats the model at ``path``, or None when it behaves: exit 0,
    or exit 2 with one line on stderr that says "onnxroof: error:" and gives a hint."""
    capsys.readouterr()
    try:
        code = main(["analyze", str(path), "-f", "json"])
    except BaseException as exc:  # anything that escapes main() is a failure to report, with its type
        return f"raised {type(exc).__name__}: {exc}"
    err = capsys.readouterr().err
    if code == 0:
        return None
    lines = err.strip().splitlines()
    if code == 2 and len(lines) == 1 and lines[0].startswith("onnxroof: error:") and "hint" in lines[0]:
        return None
    return f"exit {code}: {err.strip()}"


def fuzz(model_name: str, seed: int, count: int, folder: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The mutations of one model that misbehave, each as 'model seed S #i: mutation: what went wrong'."""
    path = folder / f"{model_name}.onnx"
    failures = []
    for i, mutation in enumerate(mutations(MODELS[model_name](), seed, count)):
        path.write_bytes(mutation.data)
        wrong = misbehaviour(path, capsys)
        if wrong is not None:
            failures.append(f"{model_name} seed {seed} #{i}: {mutation.what}: {wrong}")
    return failures


MUTATIONS_PER_MODEL = 100


@pytest.mark.ort
@pytest.mark.parametrize("model_name", sorted(MODELS))
def test_mutated_models_are_analyzed_or_refused_as_bad_input(
    model_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failures = fuzz(model_name, seed=25, count=MUTATIONS_PER_MODEL, folder=tmp_path, capsys=capsys)
    assert not failures, "\n".join(failures)


def test_the_unmutated_models_analyze(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The fuzzer's starting points are valid: each analyzes with exit 0."""
    for name, build in MODELS.items():
        path = tmp_path / f"{name}.onnx"
        path.write_bytes(with_value_info(build()).SerializeToString())
        assert main(["analyze", str(path), "-f", "json"]) == 0, name
