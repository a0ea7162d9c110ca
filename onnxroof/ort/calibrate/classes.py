"""The op classes as the calibration sorts its samples: which term of the roofline each class's ceiling corrects,
and the families of classes its benchmarks keep (convolutions, products, reorders, ...), each derived from the one
table of op classes (``onnxroof.devices.classes``)."""

from __future__ import annotations

from onnxroof.devices.classes import COMPUTE, MEMORY, classes, refined_from

__all__ = [
    "ACTIVATION_CLASSES",
    "ATTENTION_CLASSES",
    "COMPUTE_CLASSES",
    "CONV_CLASSES",
    "INT8_CLASSES",
    "INT8_CONV_CLASSES",
    "INTEGER_CONV_CLASSES",
    "MEMORY_CLASSES",
    "NBITS_CLASSES",
    "PRODUCT_CLASSES",
    "RECURRENT_CLASSES",
    "REORDER_CLASSES",
    "RESIZE_CLASSES",
    "TRANSPOSE_CLASSES",
]

# Which term of the roofline a ceiling corrects (onnxroof.devices.classes.TABLE's roof): compute classes are timed
# against FLOPs / peak, memory classes (and the epilogue pass) against bytes / level bandwidth. The other term
# keeps efficiency 1.
COMPUTE_CLASSES: frozenset[str] = classes(roof=COMPUTE, part=None)
MEMORY_CLASSES: frozenset[str] = classes(roof=MEMORY, part=None)

# The convolution classes timed against FLOPs: a convolution benchmark keeps its conv node whichever of them the
# node falls in. A depthwise 1x1 convolution is a per-channel scale and shift, the memory class batchnorm.
CONV_CLASSES: frozenset[str] = refined_from("conv") & COMPUTE_CLASSES

# The 8-bit convolutions: ConvInteger after DynamicQuantizeLinear (dynamic quantization) and the QLinearConv that
# onnxruntime fuses from a QDQ convolution (static quantization).
INTEGER_CONV_CLASSES: frozenset[str] = refined_from("conv_integer")
INT8_CONV_CLASSES: frozenset[str] = refined_from("conv_integer", "qconv")

# Matrix products: by a weight, by its rows (gemm, gemm_short, gemv), of two activations (matmul), and by a weight
# packed in 4 bits (MatMulNBits), by its rows and arithmetic.
PRODUCT_CLASSES: frozenset[str] = refined_from("gemm")
NBITS_CLASSES: frozenset[str] = frozenset(c for c in PRODUCT_CLASSES if c.endswith(("_nbits", "_nbits_int8")))

# GroupQueryAttention, its decode steps and its prefills: the fused attention ops the matmul class registers.
ATTENTION_CLASSES: frozenset[str] = refined_from("matmul")

# The compute classes timed against the int8 peak: the 8-bit convolutions and MatMulNBits at accuracy_level 4.
INT8_CLASSES: frozenset[str] = INT8_CONV_CLASSES | frozenset(c for c in NBITS_CLASSES if c.endswith("_int8"))

# The transcendental activations, each kind with a class of its own.
ACTIVATION_CLASSES: frozenset[str] = refined_from("activation")

# The recurrent ops, each timed by one time step's work.
RECURRENT_CLASSES: frozenset[str] = refined_from("recurrent")

# Transposes: by block copies along the rows, or element by element when they move more than one axis (one that
# keeps the innermost axis copies rows as any movement does, which the movement benchmarks measure).
TRANSPOSE_CLASSES: frozenset[str] = refined_from("movement") - {"movement"}

# onnxruntime's NCHW <-> NCHWc layout conversions, which it inserts around NCHWc kernels.
REORDER_CLASSES: frozenset[str] = refined_from("reorder")

# Resizes: nearest-neighbour copies, and interpolations in NCHWc and plain layout.
RESIZE_CLASSES: frozenset[str] = refined_from("resize")
