"""Calibrate this host: an empirical roofline of onnxruntime's CPU executor, in the spirit of the Empirical Roofline
Toolkit (paper 001, section III-B), measured with onnxruntime itself rather than hand-written loops.

Tiny ONNX graphs (built with ``onnx.helper``, random weights) are run by onnxruntime sessions at the requested
thread count and default optimization level, so every kernel measured is the kernel a real model gets (NCHWc
convolutions, prepacked Gemm, fused activations). Two ways of timing are used:

- **chains**: N identical shape-preserving nodes in a row (each reads the previous one's output, as in a model),
  timed by the wall clock at two chain lengths; the slope is one node's time including its dispatch. Accurate
  for small kernels, and the data is as hot as in a model.
- **profiled**: onnxruntime's profiler gives each node's kernel time, minus what the profiler itself adds per node
  (measured on tiny nodes). Used for shape-changing ops and large kernels. The measured node writes an
  intermediate tensor (a Neg follows it), and a node with large weights finds them cold: a buffer larger than the
  caches is read before each timed run, then the node's inputs are read back in, as a model hands them over.

Every benchmark is set up once and then timed a few runs at a time in passes spread over the time budget; a
kernel's time is the mean of its fastest eighth of runs. On a shared machine other work comes and goes in phases
of seconds; spreading the runs gives each benchmark runs outside them, and the fastest runs are those untouched.

What is measured:

- per-run overhead (a one-node graph) and per-node overhead (slope of run time over chains of tiny nodes);
- bandwidth of each cache level (chains of Neg over working sets sized to half of L1, L2 and part of L3; sizes
  read from /sys/devices/system/cpu/cpu0/cache or lscpu, with defaults) and of DRAM (a MatMul streaming an
  operand larger than the last-level cache); the shared last level is measured again at 2x and 4x its working
  set, and serves only the working sets at which its bandwidth holds (``effective_size``);
- peak FLOP/s: fp32 as the best of large Gemm/Conv kernels, int8 with MatMulInteger, fp16 only where the provider
  has fp16 kernels (when onnxruntime inserts Casts to fp32 there is none, and fp16 is left out);
- per op class (``onnxroof.devices.OP_CLASSES``) a ceiling: for compute classes the fraction of the peak, for
  memory classes the fraction of the level bandwidth, at several kernel sizes (see ``onnxroof.predict.engine``);
- the ``epilogue`` ceiling: the fraction of the level bandwidth that a convolution's fused Clip reaches in its
  pass over the output, timed as the difference between the same convolution fused with Clip and with Relu;
- the share of a compute-bound kernel's DRAM traffic that its computation hides (``dram_overlap``), from a
  batch-32 strided convolution whose data is larger than any cache; its NCHWc reorders give the reorder class
  points at DRAM sizes;
- the time of the reference block (``onnxroof.ort.reference``), timed in every pass, and from it the
  ``network_factor``: the block's measured time over its prediction from everything above, what a network's
  kernels run one after the other take beyond the same kernels timed alone.

Load from elsewhere while calibrating (other processes' CPU time, the hypervisor's steal) becomes a calibration
warning; the spread between runs does not, since a shared virtual machine always has some.

The package, one job per module:

- ``host``: facts about this host (CPU model, cache levels, /proc readings) and where profiles are cached;
- ``graphs``: the micro-benchmark graphs;
- ``suite``: the benchmark suite as data, full and quick, and its version (``SUITE``);
- ``classes``: the op classes as the calibration sorts its samples;
- ``jobs``: the timing jobs (profiled, chain, epilogue pair, reference) and the samples they give;
- ``ceilings``: from samples to ceilings, cache sizes, peaks, dram_overlap, network_factor and warnings;
- ``probes``: a probe (its jobs, and how it reads their timings into device fields) and the fold over probes;
- ``host_probes``, ``class_probes``: the host's probes, one per calibrated figure or a few read together;
- ``run``: ``calibrate``, the host's probes in timing order and their run; ``cache``: ``host_device``, the cached
  profile (under a lock per key);
- ``accelerator``: a GPU's roofline through the CUDA provider (peaks, bandwidth, launch and run costs), which
  ``calibrate`` runs for ``provider="cuda"``.
"""

from __future__ import annotations

from onnxroof.ort.calibrate.cache import host_device
from onnxroof.ort.calibrate.ceilings import effective_size
from onnxroof.ort.calibrate.classes import COMPUTE_CLASSES, MEMORY_CLASSES
from onnxroof.ort.calibrate.host import cache_dir, cache_levels, cache_path, cpu_model, host_key
from onnxroof.ort.calibrate.run import calibrate
from onnxroof.ort.calibrate.suite import SUITE

__all__ = [
    "COMPUTE_CLASSES",
    "MEMORY_CLASSES",
    "SUITE",
    "cache_dir",
    "cache_levels",
    "cache_path",
    "calibrate",
    "cpu_model",
    "effective_size",
    "host_device",
    "host_key",
]
