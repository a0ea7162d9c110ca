"""Models the figure tests draw: small graphs whose costs are derived by hand in each docstring."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# MatMul x[64, 128] @ w[128, 256] -> Relu -> Reshape to [16384]:
#   matmul: FLOPs = 2 * 64 * 128 * 256 = 4_194_304; bytes = x 64*128*4 (32_768) + w 128*256*4 (131_072) read,
#           64*256*4 (65_536) written = 229_376; intensity = 4_194_304 / 229_376 = 18.2857 FLOP/B
#   relu:   FLOPs = 64 * 256 = 16_384 (one per element); bytes = 65_536 read + 65_536 written = 131_072
#   reshape: no FLOPs, no bytes (a new view of the same data)
MATMUL_FLOPS = 2 * 64 * 128 * 256
MATMUL_BYTES = 64 * 128 * 4 + 128 * 256 * 4 + 64 * 256 * 4
RELU_FLOPS = 64 * 256
RELU_BYTES = 2 * 64 * 256 * 4

# v100-sxm2 at fp32 (the catalog's datasheet numbers): 15.7 TFLOP/s, 900 GB/s, 4.2 us per kernel launch,
# launches overlapping execution (each kernel takes the largest of its three terms).
V100_PEAK = 15.7e12
V100_BANDWIDTH = 900e9
V100_LAUNCH = 4.2e-6


def matmul_relu_reshape() -> onnx.ModelProto:
    w = numpy_helper.from_array(np.full((128, 256), 0.01, np.float32), "w")
    shape = numpy_helper.from_array(np.array([64 * 256], np.int64), "shape")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
        helper.make_node("Relu", ["m"], ["r"], name="relu"),
        helper.make_node("Reshape", ["r", "shape"], ["y"], name="reshape"),
    ]
    graph = helper.make_graph(
        nodes,
        "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 128])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64 * 256])],
        [w, shape],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
