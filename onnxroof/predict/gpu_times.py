"""What a GPU kernel's time is made of, from the hardware's structure and published microbenchmarks.

- A product (convolution, Gemm, MatMul) runs on the tensor cores as a grid of output tiles, one thread block per
  tile on each SM, in waves over the SMs: its arithmetic runs at the rate a published large-product benchmark
  reached (``GpuFigures.gemm_achievable``) times the share of the grid's work that is the product's own
  (:func:`tile_efficiency`): a product of 1.2 waves pays for 2, a 1x1000 output pays for a whole tile. A grid too
  small to fill the SMs splits K across thread blocks (split-K), as cuBLAS does. A product of a few rows (a decode
  step's projections) runs on the CUDA cores instead (:data:`CUDA_CORE_ROWS`).
- Any other kernel computes on the CUDA cores at the fp32 peak, scaled to the sustained clock where one is
  published.
- Activations come from L2 where the kernel's working set fits in it, else from DRAM at its achievable bandwidth;
  weights from DRAM at its achievable bandwidth.
- A kernel holds the stream for at least the device's shortest kernel.

Nothing here is fitted to a model's measured time: the figures are the device's, each with its source, and the
tiles below are the shapes CUTLASS's and cuBLAS's large-product kernels use.
"""

from __future__ import annotations

from math import ceil, prod

from onnxroof.costs import Cost, NodeView
from onnxroof.costs.nbits import NBITS_PRODUCTS, nbits_columns
from onnxroof.devices import Device
from onnxroof.devices.classes import TABLE

__all__ = [
    "CUDA_CORE_ROWS",
    "GEMM_TILES",
    "PRODUCT_CLASSES",
    "ProductShape",
    "achievable_dram",
    "achievable_rate",
    "product_rate",
    "product_shape",
    "shortest_kernel",
    "streamed_time",
    "tile_efficiency",
    "vector_rate",
]

# Thread-block tiles (rows x columns of the output) of the tensor-core product kernels: CUTLASS's default
# threadblock shapes for tensor-core GEMMs, 256x128 to 64x64 (CUTLASS's docs, media/docs/efficient_gemm.md and
# the profiler's kernel list); a product runs with the one that wastes least.
GEMM_TILES: tuple[tuple[int, int], ...] = ((256, 128), (128, 128), (128, 64), (64, 64))
# Split-K gives each thread block at least this many of K: a slice shorter than a few tile depths (32 or 64) per
# pipeline stage no longer streams (assumed: CUTLASS's split-K kernels take K slices of this order).
MIN_K_SLICE = 256

_PRODUCT_BASES = frozenset({"conv", "gemm", "matmul", "qconv", "conv_integer"})
# The classes that run on the tensor cores: products and the convolutions that are products (grouped ones as a
# batch of them); depthwise convolutions do a product per channel of one row and run on the CUDA cores.
PRODUCT_CLASSES: frozenset[str] = frozenset(
    c.name for c in TABLE if c.base in _PRODUCT_BASES and "depthwise" not in c.name and not c.part
)


class ProductShape:
    """A product as a grid of output tiles: ``batch`` products of ``rows`` x ``cols`` outputs, each summing
    ``depth`` multiply-adds."""

    __slots__ = ("batch", "cols", "depth", "rows")

    def __init__(self, batch: int, rows: int, cols: int, depth: int) -> None:
        self.batch, self.rows, self.cols, self.depth = batch, rows, cols, depth


# Convolutions and where their weight is among their inputs; each runs as an implicit GEMM.
_CONV_WEIGHT = {"Conv": 1, "ConvInteger": 1, "FusedConv": 1, "NhwcConv": 1, "QLinearConv": 3}


# Products whose B is one stored matrix whatever its input's layout.
_ONE_WEIGHT_MATRIX = frozenset({"Gemm"})


def product_shape(view: NodeView) -> ProductShape | None:
    """The product a node (or a fused kernel's anchor) computes, as an implicit GEMM: a convolution's rows are its
    output positions, its columns its output channels per group and its depth a group's input channels times the
    window; a matrix product's are its output's last two dims, over the dims before them, or, where B is one
    matrix, all of A's rows times B's columns. None where its shapes are unknown or it is no product."""
    view = view.anchor or view
    out = view.output(0)
    out_shape = out.shape if out is not None else None
    if out_shape is None or len(out_shape) < 2:
        return None
    if view.op_type in _CONV_WEIGHT:
        weight = view.input(_CONV_WEIGHT[view.op_type])
        w = weight.shape if weight is not None else None
        if w is None or len(w) < 3 or len(out_shape) < 3:
            return None
        group = max(int(view.attr("group", 1)), 1)
        return ProductShape(group, out_shape[0] * prod(out_shape[2:]), w[0] // group, w[1] * prod(w[2:]))
    a = view.input(0)
    a_shape = a.shape if a is not None else None
    if a_shape is None or not a_shape:
        return None
    transposed = view.op_type == "Gemm" and view.attr("transA", 0)
    depth = a_shape[0] if transposed else a_shape[-1]
    if view.op_type in NBITS_PRODUCTS:  # its weight matrices side by side: one GEMM of all their columns
        return ProductShape(1, prod(out_shape[:-1]), nbits_columns(view), depth)
    b = view.input(1)
    if view.op_type in _ONE_WEIGHT_MATRIX or (b is not None and b.shape is not None and len(b.shape) <= 2):
        # one matrix B for every row of A: a single GEMM over A's leading dims, as cuBLAS runs it
        return ProductShape(1, prod(out_shape[:-1]), out_shape[-1], depth)
    return ProductShape(prod(out_shape[:-2]), out_shape[-2], out_shape[-1], depth)


def tile_efficiency(shape: ProductShape | None, sm_count: int | None) -> float:
    """The share of the thread blocks' work that is the product's own, on the tile that wastes least: the useful
    multiply-adds over what ``waves`` full waves of tiles over ``sm_count`` SMs compute. 1 where the shape or the
    SM count is unknown."""
    if shape is None or not sm_count:
        return 1.0
    useful = shape.batch * shape.rows * shape.cols * shape.depth
    if useful <= 0:
        return 1.0
    best = 0.0
    for tile_rows, tile_cols in GEMM_TILES:
        tiles = shape.batch * ceil(shape.rows / tile_rows) * ceil(shape.cols / tile_cols)
        splits = max(1, min(sm_count // tiles, shape.depth // MIN_K_SLICE)) if tiles < sm_count else 1
        waves = ceil(tiles * splits / sm_count)
        paid = waves * sm_count * tile_rows * tile_cols * ceil(shape.depth / splits)
        best = max(best, useful / paid)
    return min(best, 1.0)


# A product of fewer rows than this runs on the CUDA cores, a dot product per output, with no tensor-core tile:
# TensorRT-LLM's weight-only matmul plugin takes its CUDA-core kernel where ``m < SMALL_M_FAST_PATH`` (5;
# NVIDIA/TensorRT-LLM cpp/tensorrt_llm/plugins/weightOnlyQuantMatmulPlugin/weightOnlyQuantMatmulPlugin.h); that
# other products of so few rows (cuBLAS's for a decode step's fp16 projections) do the same is assumed.
CUDA_CORE_ROWS = 5


def product_rate(device: Device, precision: str, shape: ProductShape | None) -> float:
    """FLOP/s a product reaches: a product of fewer than :data:`CUDA_CORE_ROWS` rows at the CUDA cores' rate
    (:func:`vector_rate`), any other at the large-product rate times its tiles' efficiency."""
    if shape is not None and shape.rows < CUDA_CORE_ROWS:
        return vector_rate(device)
    gpu = device.gpu
    sms = gpu.sm_count.value if gpu is not None and gpu.sm_count is not None else None
    return achievable_rate(device, precision) * tile_efficiency(shape, int(sms) if sms else None)


def _clock_ratio(device: Device) -> float:
    """The sustained clock over the boost clock the datasheet's peaks assume; 1 where either is unpublished."""
    gpu = device.gpu
    if gpu is None or gpu.sustained_clock is None or gpu.boost_clock is None:
        return 1.0
    return min(gpu.sustained_clock.value / gpu.boost_clock.value, 1.0)


def achievable_rate(device: Device, precision: str) -> float:
    """FLOP/s a large product reaches at ``precision`` in a run: the rate a published benchmark held over minutes
    where one did (a power-capped GPU falls below its short benchmarks' rate), else the published large-product
    rate, else the datasheet's peak at the sustained clock."""
    gpu = device.gpu
    used = device.resolve_precision(precision)
    if gpu is not None:
        for rates in (gpu.gemm_sustained, gpu.gemm_achievable):
            found = rates.get(precision) or rates.get(used)
            if found is not None:
                return found.value
    return device.peak_flops[used].value * _clock_ratio(device)


def vector_rate(device: Device) -> float:
    """FLOP/s of the CUDA cores (the fp32 peak at the sustained clock): what a kernel that is no product runs at."""
    return device.peak("fp32")[0] * _clock_ratio(device)


def achievable_dram(device: Device) -> float:
    """Bytes/s a streaming kernel reaches from DRAM: the published benchmark's figure, else the datasheet's."""
    gpu = device.gpu
    if gpu is not None and gpu.dram_achievable is not None:
        return gpu.dram_achievable.value
    return device.memory_bandwidth.value


def _l2(device: Device) -> tuple[float, float] | None:
    """(size, bandwidth) of the device's L2 where both are known."""
    gpu = device.gpu
    size = next((c.size for c in device.caches if c.level.upper() == "L2"), None)
    if gpu is None or gpu.l2_bandwidth is None or size is None:
        return None
    return size, gpu.l2_bandwidth.value


def streamed_time(cost: Cost, weights: float, device: Device) -> float:
    """Seconds a kernel moves its bytes in: its activations from L2 where they fit in it (the kernel before wrote
    them there), else from DRAM; its weights from DRAM."""
    activations = max(cost.bytes - weights, 0.0)
    dram = achievable_dram(device)
    l2 = _l2(device)
    activation_rate = l2[1] if l2 is not None and activations <= l2[0] else dram
    return activations / activation_rate + weights / dram


def shortest_kernel(device: Device) -> float:
    """What a kernel with no work holds the stream for when kernels run back to back (its launch, first loads and
    drain, which every kernel pays beside its work): the published figure, else the device's launch overhead."""
    gpu = device.gpu
    if gpu is not None and gpu.shortest_kernel is not None:
        return gpu.shortest_kernel.value
    return device.launch_overhead.value
