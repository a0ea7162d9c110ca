"""Target devices: peak FLOP/s per precision, memory bandwidth, launch overhead, with a source for every number.

The bundled catalog (``catalog.toml`` next to this file) and a user's device file share one schema and one
parser, :func:`device_from_dict`. A device file holds ONE device; its top-level keys are the device's fields
(``key`` defaults to the file stem), or, equally, a single table copied from the catalog::

    name = "My workstation GPU"
    kind = "gpu"                   # gpu | cpu | tpu
    overlap = "max"                # max | serial, see Device.overlap
    [peak_flops.fp32]
    value = 19.5e12                # FLOP/s
    dense = true                   # a dense figure, not a 2:4-sparsity one
    source = "vendor datasheet: 19.5 TFLOPS FP32"
    [memory_bandwidth]
    value = 1555e9                 # bytes/s
    source = "vendor datasheet: 1,555 GB/s"
    [launch_overhead]
    value = 4.2e-6                 # seconds per kernel
    source = "paper 001: 4.2 us measured kernel launch latency on V100"
    # optional: [memory_capacity] (bytes), [[caches]] (level, size in bytes, scope, optional bandwidth), engine
    # optional on a GPU: [gpu.sm_count], [gpu.boost_clock], [gpu.sustained_clock] (Hz), [gpu.dram_achievable],
    #   [gpu.l2_bandwidth] (bytes/s), [gpu.shortest_kernel] (s), [gpu.gemm_achievable.fp16] and
    #   [gpu.gemm_sustained.fp16] (FLOP/s per precision: a short and a minutes-long benchmark):
    #   published microbenchmarks' figures, each with value and source (onnxroof.devices.GpuFigures)

A calibrated host profile (``onnxroof.ort.calibrate``) adds what an engine-aware prediction
(``onnxroof.predict.engine``) needs on top of the roofline: the engine's fixed cost per run, how it was measured,
and per op class how close its kernels come to the peak and to the bandwidth of the memory level their data
sits in::

    engine = "onnxruntime"
    [run_overhead]                 # seconds per session.run, paid once per model
    value = 1.2e-05
    source = "calibrated: ..."
    [dram_overlap]                 # optional: share of a compute-bound kernel's DRAM time its compute hides
    value = 0.4
    source = "calibrated: ..."
    [network_factor]               # optional: a network's kernels take this times their time alone
    value = 1.1
    source = "calibrated: ..."
    inputs = { median_s = 0.021, predicted_s = 0.019, fixed_s = 0.0004, runs = 60, threads = 1, passes = 8 }
                                   # optional on any figure: the measured numbers it came from, by name
    [weight_reuse]                 # optional: how much faster than from DRAM weights come back between runs
    points = [[4.2e6, 2.5], [3.4e7, 1.0]]   # [bytes one inference touches, speedup over DRAM]
    source = "calibrated: ..."
    [conv_weight_wait]             # optional: how much of its weights' read a compute-bound convolution waits for
    points = [[6.1e5, 1.2], [9.4e6, 0.5]]   # [weight bytes, share of their read at the DRAM bandwidth]
    source = "calibrated: ..."
    [softmax_underflow]            # optional: seconds a Softmax element whose exp underflows adds
    value = 1.7e-08
    source = "calibrated: ..."
    [subnormal_product]            # optional: seconds a multiply-add with a subnormal operand adds
    value = 2.8e-09
    source = "calibrated: ..."
    [branch_overhead]              # optional: seconds an If adds to the nodes of the branch it runs
    value = 2.1e-06
    source = "calibrated: ..."
    [load_limit]                   # optional: bytes/s the calibrated cores can load and store at most; no
    value = 4.99e11                #   bandwidth above it loads
    source = "derived: 1 core x 2.6 GHz x ..."
    [flop_limit]                   # optional: fp32 FLOP/s their vector units compute at most; no peak above it
    value = 3.33e11
    source = "derived: ..."
    [calibration]                  # how the numbers were measured (metadata, no sources needed)
    provider = "cpu"
    threads = 1
    onnxruntime = "1.23.2"
    cpu = "Intel(R) Xeon(R) Processor"
    date = "2025-01-01T00:00:00+00:00"
    duration_s = 95.0
    profiler_overhead = 2.5e-06    # optional: what onnxruntime's profiler adds to each node's kernel time
    reference_time_s = 1.9e-3      # optional: seconds per run of onnxroof.ort.reference's block when calibrated
    warnings = []                  # optional: e.g. a busy machine (large spread between repeats)
    suite = 2                      # optional: the calibration suite's version (1 when absent)
    [ceilings.conv]                # one table per op class (see OP_CLASSES), or per part (PART_CEILINGS)
    compute = [[2.0e7, 0.71], [2.3e8, 0.84], [1.8e9, 0.88]]   # [FLOPs, fraction of the peak]
    memory = [[1.0e5, 0.4], [4.0e6, 0.9]]                     # [bytes moved, fraction of the level bandwidth]
    source = "calibrated: ..."

A ceiling's points are interpolated linearly in log(work) and held constant beyond the first and last point,
so small kernels get the lower efficiency measured on small kernels. Either table may be left out (efficiency 1).

Conventions:

- Units are SI: FLOP/s, bytes/s, bytes, seconds. Capacities are converted in the unit their source states:
  a vendor's "80 GB" is 80e9 bytes, Google's "32 GiB" is 32 * 2**30 bytes. Cache sizes are binary (KiB/MiB).
- ``value`` of a peak is always the dense figure. Datasheets that quote 2:4 structured sparsity (A100, H100,
  H200, L4) double the dense rate; that figure may be kept as ``sparse_value`` and is never used as the peak.
- Every number carries a non-empty ``source``; derived numbers say ``derived: <formula>``, assumptions say so.
- Integer precisions (int8) are in OP/s and count a multiply-accumulate as 2 ops, like the FLOP counts.
"""

from __future__ import annotations

from onnxroof.devices.files import catalog, device_from_dict, load_device, save_device
from onnxroof.devices.schema import (
    CACHE_SCOPES,
    CEILING_NAMES,
    FALLBACK,
    GPU_FIGURES,
    KINDS,
    OP_CLASSES,
    OVERLAPS,
    PART_CEILINGS,
    PRECISIONS,
    TERMINAL_PRECISIONS,
    CacheLevel,
    Calibration,
    Ceiling,
    Device,
    FrozenMap,
    GpuFigures,
    Peak,
    Sourced,
    WeightReuse,
    WeightWait,
    limit_violations,
    normalize_precision,
)

__all__ = [
    "CACHE_SCOPES",
    "CEILING_NAMES",
    "FALLBACK",
    "GPU_FIGURES",
    "KINDS",
    "OP_CLASSES",
    "OVERLAPS",
    "PART_CEILINGS",
    "PRECISIONS",
    "TERMINAL_PRECISIONS",
    "CacheLevel",
    "Calibration",
    "Ceiling",
    "Device",
    "FrozenMap",
    "GpuFigures",
    "Peak",
    "Sourced",
    "WeightReuse",
    "WeightWait",
    "catalog",
    "device_from_dict",
    "limit_violations",
    "load_device",
    "normalize_precision",
    "save_device",
]
