"""The op classes as the calibration sorts its samples: the convolution classes, the layout reorders, and which
term of the roofline each class's ceiling corrects."""

from __future__ import annotations

from onnxroof.predict.op_classes import REFINEMENTS

__all__ = [
    "ACTIVATION_CLASSES",
    "COMPUTE_CLASSES",
    "CONV_CLASSES",
    "INT8_CONV_CLASSES",
    "INTEGER_CONV_CLASSES",
    "MEMORY_CLASSES",
    "PRODUCT_CLASSES",
    "RECURRENT_CLASSES",
    "REORDER_CLASSES",
    "RESIZE_CLASSES",
]

# The convolution classes, each a compute class: a convolution benchmark keeps its conv node whichever of them
# the node falls in. A depthwise 1x1 convolution is a per-channel scale and shift, the memory class batchnorm.
CONV_CLASSES: frozenset[str] = REFINEMENTS["conv"].classes - {"batchnorm"}

# The 8-bit convolutions: ConvInteger after DynamicQuantizeLinear (dynamic quantization) and the QLinearConv that
# onnxruntime fuses from a QDQ convolution (static quantization).
INTEGER_CONV_CLASSES: frozenset[str] = REFINEMENTS["conv_integer"].classes
INT8_CONV_CLASSES: frozenset[str] = INTEGER_CONV_CLASSES | REFINEMENTS["qconv"].classes

# Matrix products: by a weight, by its rows (gemm, gemm_short, gemv), and of two activations (matmul).
PRODUCT_CLASSES: frozenset[str] = REFINEMENTS["gemm"].classes

# The transcendental activations, each kind with a class of its own.
ACTIVATION_CLASSES: frozenset[str] = REFINEMENTS["activation"].classes

# The recurrent ops, each timed by one time step's work.
RECURRENT_CLASSES: frozenset[str] = REFINEMENTS["recurrent"].classes

# Transposes: by block copies, or element by element when they move more than one axis.
TRANSPOSE_CLASSES: frozenset[str] = REFINEMENTS["transpose"].classes

# onnxruntime's NCHW <-> NCHWc layout conversions, which it inserts around NCHWc kernels.
REORDER_CLASSES: frozenset[str] = REFINEMENTS["reorder"].classes

# Resizes: nearest-neighbour copies, and interpolations in NCHWc and plain layout.
RESIZE_CLASSES: frozenset[str] = REFINEMENTS["resize"].classes

# Which term of the roofline a ceiling corrects: compute classes are timed against FLOPs / peak, memory classes
# (and the epilogue pass) against bytes / level bandwidth. An interpolating resize is a compute class: its time
# per output element holds at every size, as its FLOPs per element do. The other term keeps efficiency 1.
COMPUTE_CLASSES: frozenset[str] = (
    CONV_CLASSES
    | INT8_CONV_CLASSES
    | PRODUCT_CLASSES
    | ACTIVATION_CLASSES
    | RECURRENT_CLASSES
    | (RESIZE_CLASSES - {"resize"})
    | frozenset({"lrn", "softmax", "layernorm", "skip_layernorm", "instancenorm"})
)
MEMORY_CLASSES: frozenset[str] = REORDER_CLASSES | frozenset(
    {
        "pool",
        "pool_nchw",
        "global_pool",
        "batchnorm",
        "elementwise",
        "broadcast",
        "movement",
        "transpose",
        "transpose_inner",
        "transpose_batched",
        "transpose_generic",
        "resize",
        "reduce",
        "epilogue",
        "cast",
        "quantize",
    }
)
