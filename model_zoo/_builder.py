"""The graph-building helper shared by every zoo model.

``GraphBuilder`` collects nodes and initializers while a model is described layer by layer, and turns them into
an ``onnx.ModelProto`` (opset 17, IR version 8). Learned parameters become initializers drawn from a
``numpy.random.default_rng`` seeded per model, so two builds of the same model are byte-identical. Fixed values
that are part of the computation rather than learned (reshape targets, Clip bounds, the GELU constants, Resize
scales, Gather indices) become ``Constant`` nodes, so the initializers of a zoo model are exactly its parameters
and BatchNormalization statistics.

``weights=False`` is handled in one place, :meth:`GraphBuilder.add_weight`: the initializer then keeps only its
name, dims and dtype and points at external data at location ``#<model>.weights.data`` (never written), with
consecutive offsets and lengths. The leading ``#`` is ONNX's marker for external data held elsewhere than on
disk (see ``onnx.model_container``): ``onnx.checker.check_model`` skips the file-existence check for such
locations, which it otherwise enforces even for an in-memory model. Such a model passes ``check_model`` and
shape inference without materialising its weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import Any, Literal

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["IR_VERSION", "OPSET", "GraphBuilder", "Init", "conv_out"]

OPSET = 17
IR_VERSION = 8

#: How a weight is initialised: He-scaled normal (std sqrt(2 / fan_in)), a normal with an explicit std,
#: or a constant zeros / ones tensor (biases, BatchNormalization and LayerNormalization affine terms).
Init = Literal["he", "normal", "zeros", "ones"]


def conv_out(size: int, kernel: int, stride: int, pad: int = 0) -> int:
    """Output side of a conv or pool along one axis (floor mode)."""
    return (size + 2 * pad - kernel) // stride + 1


class GraphBuilder:
    """Collects the nodes, initializers and constants of one model and assembles the ModelProto.

    Tensor names follow the torchvision ``state_dict`` names where there is one (``layer1.0.conv1.weight``);
    a node's output tensor is named after the node unless a name is given.
    """

    def __init__(self, name: str, *, seed: int, weights: bool = True, doc: str = "") -> None:
        self.name = name
        self.doc = doc
        self.weights = weights
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []
        self._used: set[str] = set()
        self._consts: dict[tuple[int, tuple[int, ...], bytes], str] = {}
        self._external_offset = 0
        #: Where ``weights=False`` initializers point; '#' marks data not on disk, skipped by check_model.
        self.external_location = f"#{name}.weights.data"

    # -- naming -----------------------------------------------------------------------------------------------

    def unique(self, name: str) -> str:
        """``name`` itself the first time, then ``name_1``, ``name_2``, ... ."""
        candidate, n = name, 0
        while candidate in self._used:
            n += 1
            candidate = f"{name}_{n}"
        self._used.add(candidate)
        return candidate

    # -- values -----------------------------------------------------------------------------------------------

    def add_weight(
        self,
        name: str,
        shape: Sequence[int],
        *,
        init: Init = "he",
        fan_in: int | None = None,
        std: float | None = None,
        dtype: int = TensorProto.FLOAT,
    ) -> str:
        """An initializer of ``shape`` (float32 unless ``dtype`` says float16 or uint8); returns its name.

        ``init="he"`` draws a normal with std ``sqrt(2 / fan_in)`` (``fan_in`` defaults to the product of all
        dims but the first, as for a conv kernel ``[out, in, kh, kw]``); ``init="normal"`` uses ``std``. A uint8
        tensor (packed low-bit weights) is drawn uniformly over its 256 values. With ``weights=False`` no values
        are drawn and the tensor points at external data instead.
        """
        name = self.unique(name)
        dims = [int(d) for d in shape]
        np_dtype = helper.tensor_dtype_to_np_dtype(dtype)
        if not self.weights:
            tensor = TensorProto()
            tensor.name = name
            tensor.data_type = dtype
            tensor.dims.extend(dims)
            length = prod(dims) * np_dtype.itemsize
            tensor.data_location = TensorProto.EXTERNAL
            for key, value in (
                ("location", self.external_location),
                ("offset", str(self._external_offset)),
                ("length", str(length)),
            ):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value
            self._external_offset += length
            self.initializers.append(tensor)
            return name
        if dtype == TensorProto.UINT8:
            packed = self.rng.integers(0, 256, dims, dtype=np.uint8)
            self.initializers.append(numpy_helper.from_array(packed, name))
            return name
        if init == "zeros":
            array = np.zeros(dims, dtype=np.float32)
        elif init == "ones":
            array = np.ones(dims, dtype=np.float32)
        else:
            if init == "he":
                fan = fan_in if fan_in is not None else prod(dims[1:])
                scale = float(np.sqrt(2.0 / fan))
            elif init == "normal":
                if std is None:
                    raise ValueError("init='normal' needs std")
                scale = std
            else:
                raise ValueError(f"unknown init {init!r}")
            array = self.rng.standard_normal(dims, dtype=np.float32) * np.float32(scale)
        self.initializers.append(numpy_helper.from_array(array.astype(np_dtype), name))
        return name

    def const(self, value: np.ndarray | Sequence[int] | float, name: str = "const") -> str:
        """A fixed (non-learned) value as the output of a Constant node; identical values share one node.

        Python ints and int sequences become int64 tensors, floats become float32 scalars.
        """
        if isinstance(value, np.ndarray):
            array = value
        elif isinstance(value, float):
            array = np.array(value, dtype=np.float32)
        else:
            array = np.array(value, dtype=np.int64)
        key = (int(helper.np_dtype_to_tensor_dtype(array.dtype)), tuple(array.shape), array.tobytes())
        if key in self._consts:
            return self._consts[key]
        out = self.unique(name)
        self.nodes.append(helper.make_node("Constant", [], [out], name=out, value=numpy_helper.from_array(array, out)))
        self._consts[key] = out
        return out

    # -- generic node -----------------------------------------------------------------------------------------

    def node(
        self,
        op_type: str,
        inputs: Sequence[str],
        name: str,
        *,
        outputs: int | Sequence[str] = 1,
        **attrs: Any,
    ) -> str:
        """Append a node named ``name`` (made unique); returns its first output's name.

        ``outputs`` is either a count (outputs named ``<node>``, ``<node>:1``, ...) or explicit output names.
        """
        return self.node_outputs(op_type, inputs, name, outputs=outputs, **attrs)[0]

    def node_outputs(
        self,
        op_type: str,
        inputs: Sequence[str],
        name: str,
        *,
        outputs: int | Sequence[str] = 1,
        **attrs: Any,
    ) -> list[str]:
        """Like :meth:`node` but returns all output names (Split, LSTM)."""
        node_name = self.unique(name)
        if isinstance(outputs, int):
            out_names = [node_name] + [self.unique(f"{node_name}:{i}") for i in range(1, outputs)]
        else:
            out_names = [self.unique(o) for o in outputs]
        self.nodes.append(helper.make_node(op_type, list(inputs), out_names, name=node_name, **attrs))
        return out_names

    # -- layers -----------------------------------------------------------------------------------------------

    def conv(
        self,
        x: str,
        name: str,
        cin: int,
        cout: int,
        kernel: int,
        *,
        stride: int = 1,
        pad: int = 0,
        group: int = 1,
        bias: bool = True,
        out: str | None = None,
    ) -> str:
        """Conv2d with a ``[cout, cin/group, k, k]`` He-initialised kernel (``<name>.weight``) and an optional
        zero bias (``<name>.bias``)."""
        w = self.add_weight(f"{name}.weight", [cout, cin // group, kernel, kernel])
        inputs = [x, w]
        if bias:
            inputs.append(self.add_weight(f"{name}.bias", [cout], init="zeros"))
        return self.node(
            "Conv",
            inputs,
            name,
            outputs=[out] if out else 1,
            kernel_shape=[kernel, kernel],
            strides=[stride, stride],
            pads=[pad] * 4,
            dilations=[1, 1],
            group=group,
        )

    def bn(self, x: str, name: str, channels: int, *, eps: float = 1e-5) -> str:
        """Inference BatchNormalization with torchvision's parameter names; inputs 3 and 4 are the running
        statistics (buffers, not parameters)."""
        scale = self.add_weight(f"{name}.weight", [channels], init="ones")
        bias = self.add_weight(f"{name}.bias", [channels], init="zeros")
        mean = self.add_weight(f"{name}.running_mean", [channels], init="zeros")
        var = self.add_weight(f"{name}.running_var", [channels], init="ones")
        return self.node("BatchNormalization", [x, scale, bias, mean, var], name, epsilon=eps)

    def relu(self, x: str, name: str) -> str:
        return self.node("Relu", [x], name)

    def relu6(self, x: str, name: str) -> str:
        """ReLU6 as opset-17 Clip with min 0 and max 6 given as inputs."""
        return self.node("Clip", [x, self.const(0.0, "clip.min"), self.const(6.0, "clip.max")], name)

    def maxpool(self, x: str, name: str, kernel: int, stride: int, pad: int = 0) -> str:
        return self.node("MaxPool", [x], name, kernel_shape=[kernel, kernel], strides=[stride, stride], pads=[pad] * 4)

    def avgpool(self, x: str, name: str, kernel: int, stride: int) -> str:
        return self.node("AveragePool", [x], name, kernel_shape=[kernel, kernel], strides=[stride, stride])

    def upsample_nearest(self, x: str, name: str, factor: int) -> str:
        """Nearest-neighbour Resize by an integer factor on both spatial axes (PyTorch/Keras 'nearest':
        asymmetric coordinates, floor)."""
        scales = self.const(np.array([1.0, 1.0, factor, factor], dtype=np.float32), f"scales_x{factor}")
        return self.node(
            "Resize",
            [x, "", scales],
            name,
            mode="nearest",
            coordinate_transformation_mode="asymmetric",
            nearest_mode="floor",
        )

    def adaptive_avgpool(self, x: str, name: str, spatial: int, target: int) -> str:
        """torchvision's AdaptiveAvgPool2d(target) on a square ``spatial`` x ``spatial`` map, for the cases
        with a plain ONNX equivalent: the identity when sizes match, AveragePool when ``target`` divides
        ``spatial``, and a nearest Resize when ``spatial`` divides ``target`` (every bin then holds exactly
        one input element)."""
        if spatial == target:
            return x
        if spatial % target == 0:
            k = spatial // target
            return self.avgpool(x, name, k, k)
        if target % spatial == 0:
            return self.upsample_nearest(x, name, target // spatial)
        raise ValueError(
            f"adaptive average pooling from {spatial}x{spatial} to {target}x{target} has no exact "
            "AveragePool/Resize form; choose an input size whose final feature map divides or is divisible "
            f"by {target}"
        )

    def global_avgpool(self, x: str, name: str) -> str:
        return self.node("GlobalAveragePool", [x], name)

    def flatten(self, x: str, name: str) -> str:
        return self.node("Flatten", [x], name, axis=1)

    def gemm(self, x: str, name: str, fin: int, fout: int, *, out: str | None = None) -> str:
        """nn.Linear as Gemm(x, W^T) + b with the torch ``[out, in]`` weight layout (transB=1)."""
        w = self.add_weight(f"{name}.weight", [fout, fin], fan_in=fin)
        b = self.add_weight(f"{name}.bias", [fout], init="zeros")
        return self.node("Gemm", [x, w, b], name, outputs=[out] if out else 1, transB=1)

    def linear(self, x: str, name: str, fin: int, fout: int, *, weight_name: str | None = None) -> str:
        """nn.Linear on a rank>2 input as MatMul with an ``[in, out]`` weight followed by a bias Add."""
        base = weight_name or name
        w = self.add_weight(f"{base}.weight", [fin, fout], fan_in=fin)
        b = self.add_weight(f"{base}.bias", [fout], init="zeros")
        y = self.node("MatMul", [x, w], f"{name}.matmul")
        return self.node("Add", [y, b], f"{name}.add")

    def layernorm(self, x: str, name: str, dim: int, *, eps: float = 1e-6) -> str:
        """opset-17 LayerNormalization over the last axis."""
        scale = self.add_weight(f"{name}.weight", [dim], init="ones")
        bias = self.add_weight(f"{name}.bias", [dim], init="zeros")
        return self.node("LayerNormalization", [x, scale, bias], name, axis=-1, epsilon=eps)

    # -- assembly ---------------------------------------------------------------------------------------------

    def model(
        self,
        inputs: Sequence[tuple[str, Sequence[int | str]] | tuple[str, Sequence[int | str], int]],
        outputs: Sequence[tuple[str, Sequence[int | str]] | tuple[str, Sequence[int | str], int]],
        *,
        domains: Sequence[str] = (),
    ) -> onnx.ModelProto:
        """The ModelProto: graph inputs and outputs as ``(name, shape)`` (float32) or ``(name, shape, dtype)``,
        a dim given as a string being symbolic; opset 17, version 1 of each of ``domains``, IR version 8."""

        def value_info(spec: tuple) -> onnx.ValueInfoProto:
            name, shape, *dtype = spec
            return helper.make_tensor_value_info(name, dtype[0] if dtype else TensorProto.FLOAT, list(shape))

        graph = helper.make_graph(
            self.nodes,
            self.name,
            [value_info(spec) for spec in inputs],
            [value_info(spec) for spec in outputs],
            initializer=self.initializers,
            doc_string=self.doc,
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET), *(helper.make_opsetid(d, 1) for d in domains)],
            producer_name="onnxroof.model_zoo",
            ir_version=IR_VERSION,
        )
        model.doc_string = self.doc
        return model
