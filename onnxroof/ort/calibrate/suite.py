"""The benchmark suite as data: every benchmark a calibration times (kind, label, graph builder and its
arguments, the op classes whose nodes it keeps, whether its weights are read cold), and how much and how long
each is timed, in a full and a quick form.

The op-class benchmarks use shapes typical of CNNs and transformers at batch 1. The quick suite is a reduced set
of small shapes timed in two passes, for tests and smoke checks.
"""

from __future__ import annotations

from onnx import TensorProto

from onnxroof.devices.classes import classes
from onnxroof.ort.calibrate import chains, graphs, rows
from onnxroof.ort.calibrate.bench import Bench, MiB, Suite
from onnxroof.ort.calibrate.classes import (
    ACTIVATION_CLASSES,
    RECURRENT_CLASSES,
    REORDER_CLASSES,
)

__all__ = ["FULL", "QUICK", "SUITE", "Bench", "Suite"]

# The benchmark suite's version, recorded in every profile: bumping it makes --device host calibrate again any
# cached profile from an older suite, which lacks what this one measures. What each version added: docs/runs/suites.md
# and this file's history.
SUITE = 49

# ---------------------------------------------------------------------------------------------------- the suites

# (cin, cout, hw, k, group) of the full suite's int8 convolutions: dense and depthwise ones of ResNet's and
# MobileNet's stages; the dynamic ones include deep layers on 2x2 outputs, bound by their weights.
_Row = tuple[int, int, int, int, int]
_DYNAMIC_INT8_ROWS: tuple[_Row, ...] = ((64, 64, 28, 3, 1), (128, 128, 14, 3, 1), (32, 192, 28, 1, 1))
_DYNAMIC_INT8_ROWS += ((256, 256, 2, 3, 1), (512, 512, 2, 3, 1), (320, 1280, 2, 1, 1), (144, 144, 56, 3, 144))
_DYNAMIC_INT8_ROWS += ((192, 192, 28, 3, 192), (576, 576, 14, 3, 576), (960, 960, 7, 3, 960))
_STATIC_INT8_ROWS: tuple[_Row, ...] = ((64, 64, 28, 3, 1), (128, 128, 14, 3, 1), (256, 256, 7, 3, 1))
_STATIC_INT8_ROWS += ((512, 512, 4, 3, 1), (32, 192, 28, 1, 1), (96, 24, 56, 1, 1), (144, 144, 56, 3, 144))
_STATIC_INT8_ROWS += ((192, 192, 28, 3, 192), (576, 576, 14, 3, 576), (960, 960, 7, 3, 960))

# (k, n) of the one-row MatMulNBits benchmarks, weights past COLD_WEIGHTS (Qwen2.5-0.5B's up and down projections,
# Llama-3.2-1B's), and (rows, k, n) of the longer ones, from 32 rows to 256 by an 896 x 896 weight
_NBITS_WEIGHTS: tuple[tuple[int, int], ...] = ((896, 4864), (4864, 896), (2048, 8192))
_NBITS_PROMPTS: tuple[tuple[int, int, int], ...] = ((32, 896, 896), (128, 256, 1024), (128, 896, 896), (256, 896, 896))
# (heads, kv_heads, head size) of the GroupQueryAttention benchmarks
_DECODE_HEADS: tuple[tuple[int, int, int], ...] = ((14, 2, 64), (32, 8, 64), (8, 2, 128), (16, 16, 64))
_PREFILL_HEADS: tuple[tuple[int, int, int], ...] = ((8, 2, 64), (8, 8, 64), (8, 2, 128))

_FULL_BENCHES: tuple[Bench, ...] = (
    # convolutions: ResNet, VGG, U-Net, AlexNet, Inception, MobileNet stems
    *rows.convs(
        (64, 64, 56, 3, 1),
        (128, 128, 28, 3, 1),
        (256, 256, 14, 3, 1),
        (96, 128, 28, 3, 1),
        (64, 96, 14, 3, 1),
        (512, 512, 14, 3, 1),
        (128, 128, 56, 3, 2),
        (32, 64, 27, 5, 1),
        (16, 64, 55, 3, 1),
        (64, 256, 56, 1, 1),
        (256, 64, 56, 1, 1),
        (128, 512, 28, 1, 1),
        (512, 128, 28, 1, 1),
        (1024, 256, 14, 1, 1),
        (256, 1024, 14, 1, 1),
        (192, 32, 28, 1, 1),
        (256, 512, 28, 1, 2),
        (96, 32, 56, 1, 1),
        (512, 512, 7, 3, 1),
        (160, 224, 7, 3, 1),
        (256, 512, 8, 3, 1),
        (1024, 256, 7, 1, 1),
        (2048, 512, 7, 1, 1),
        (3, 64, 224, 7, 2),
        (3, 32, 224, 3, 2),
        (32, 16, 112, 1, 1),
        (16, 96, 112, 1, 1),
        (64, 16, 56, 1, 1),
        (128, 128, 112, 3, 1),
        (256, 256, 56, 3, 1),
        (192, 64, 64, 3, 1),
        (384, 128, 32, 3, 1),
        (32, 32, 128, 3, 1),
        (256, 512, 13, 3, 1),
        (64, 192, 27, 5, 1),
        (96, 256, 55, 5, 2),
        (3, 64, 224, 3, 1),
        (3, 64, 224, 11, 4),
        (3, 96, 224, 7, 2),
        (32, 4, 128, 1, 1),
        (16, 32, 28, 5, 1),
        (32, 96, 28, 5, 1),
    ),
    # one output position (conv_vector): the squeeze-and-excitation products of EfficientNet-B0's blocks,
    # MobileNetV3-Large's last stage and RegNetY-400MF's last stage
    *rows.vector_convs((32, 8), (96, 4), (144, 6), (240, 10), (480, 20), (672, 28), (1152, 48), (960, 240)),
    *rows.vector_convs((440, 110)),
    # over one axis (conv_1d): wav2vec2's feature encoder from its first layer (one channel, 10 taps, stride 5 over 1 s
    # of 16 kHz audio) down its stride-2 layers, and Whisper's two layers over 80 mel bins
    *rows.conv1ds((1, 512, 16000, 10, 5), (512, 512, 799, 3, 2), (512, 512, 399, 3, 2), (512, 512, 199, 3, 2)),
    *rows.conv1ds((512, 512, 99, 2, 2), (80, 384, 1000, 3, 1), (384, 384, 1000, 3, 2)),
    # ... and small models' front ends, 60 k to 2 M FLOPs: a voice-activity detector's frame of 512 samples (a
    # strided filter bank, a short STFT-like one of 258 channels over 640, layers over a few dozen positions) and a
    # keyword spotter's layer over 98 frames of 40 features
    *rows.conv1ds((1, 32, 512, 16, 8), (32, 64, 63, 3, 2), (1, 258, 640, 256, 128), (129, 128, 4, 3, 1)),
    *rows.conv1ds((64, 64, 31, 3, 1), (40, 64, 98, 3, 1), (1, 64, 512, 32, 16)),
    # depthwise: the strided ones; the stride-1 ones are the Relu twins of the epilogue pairs below
    *rows.depthwise((96, 112, 2), (144, 56, 2), (576, 14, 2)),
    # depthwise with most output columns at the padding: LR-ASPP's and DeepLabV3's MobileNetV3 backbone at 1/16 of a
    # 224 input (5x5, dilation 2), a 3x3 one dilated further, and MobileNetV3's and EfficientNet's 5x5 ones on 7x7
    *rows.border_depthwise((672, 14, 5, 2), (960, 14, 5, 2), (480, 14, 3, 4), (576, 7, 5, 1), (1152, 7, 5, 1)),
    # depthwise in plain layout, by the work of one channel: ShuffleNet's 58 channels, and others NCHWc leaves
    *rows.depthwise((58, 28, 1), (58, 56, 2), (30, 56, 1), (90, 14, 1)),
    # MobileNet's ReLU6 (Clip) is applied in a pass over the output after the kernel: its depthwise convolutions
    # and 1x1 expansions, outputs from 188 kB to 4.8 MB (the depthwise Relu twins are depthwise samples too)
    *rows.epilogues(
        (144, 144, 56, 3, 144),
        (32, 32, 112, 3, 32),
        (192, 192, 28, 3, 192),
        (384, 384, 14, 3, 384),
        (960, 960, 7, 3, 960),
        (16, 96, 112, 1, 1),
        (24, 144, 56, 1, 1),
        (32, 192, 28, 1, 1),
        (64, 384, 14, 1, 1),
        (160, 960, 7, 1, 1),
    ),
    # grouped: ShuffleNet's 1x1 and ResNeXt's 3x3 in plain layout; AlexNet's two-group 3x3, whose groups fill
    # whole NCHWc blocks, is a conv_mid sample
    *rows.grouped((136, 28, 1, 4), (272, 14, 1, 4), (544, 7, 1, 4), (384, 13, 3, 2), (128, 56, 3, 32)),
    # narrow groups, by the work of one group: RegNet's groups of 8 over its four stages, ResNeXt's of 8 at 28x28
    *rows.grouped((48, 56, 3, 6), (104, 28, 3, 13), (208, 14, 3, 26), (440, 7, 3, 55), (256, 28, 3, 32)),
    # the weights' wait of dense convolutions (conv_weight_wait): MobileNet's and EfficientNet's 1x1 convolutions
    # on their last stages' small maps, ResNet-50's and ResNet-18's last stages, 0.2 to 9.4 MB of weights
    *rows.weight_waits(
        (96, 576, 14, 1),
        (160, 960, 7, 1),
        (1024, 256, 7, 1),
        (320, 1280, 7, 1),
        (256, 256, 14, 3),
        (2048, 512, 7, 1),
        (512, 512, 7, 3),
    ),
    # matrix products: transformer projections and MLPs, attention, and matrix-vector classifiers at batch 1
    *rows.gemms(
        (197, 768, 768),
        (197, 768, 3072),
        (197, 3072, 768),
        (197, 768, 2304),
        (50, 512, 512),
        (50, 384, 1536),
        (50, 768, 3072),
        (128, 1024, 1024),
        (16, 256, 256),
        (197, 192, 192),
        (197, 192, 768),
        (197, 768, 192),
        (64, 128, 128),
        (16, 512, 512),
        (2, 768, 768),
        (4, 768, 3072),
        (8, 768, 768),
        (8, 192, 192),
        (4, 384, 384),
        (2, 2048, 1000),
        (12, 512, 512),
        (1, 9216, 4096),
        (1, 4096, 4096),
        (1, 2048, 1000),
        (1, 1024, 1000),
        (1, 512, 1000),
        (1, 768, 768),
        (1, 384, 384),
        (1, 192, 768),
    ),
    rows.profile("MatMul 1x197x768 by weight 768x768", graphs.matmul_weight, (1, 197, 768, 768), {"gemm"}),
    # products by 4-bit weights (MatMulNBits), at accuracy_level 0 (fp32) and 4 (int8): a decode step's one row by
    # Qwen2.5-0.5B's MLP weights and Llama-3.2-1B's, read cold; a prompt's rows by its attention's weights
    *rows.matmul_nbits(*((1, k, n, level) for k, n in _NBITS_WEIGHTS for level in (0, 4))),
    *rows.matmul_nbits(*((m, k, n, level) for m, k, n in _NBITS_PROMPTS for level in (0, 4))),
    # products of two activations: per head (ViT, BERT) and per window and head (Swin's 7x7 windows)
    *rows.attention(
        (12, 197, 64, 197),
        (12, 197, 197, 64),
        (8, 128, 64, 128),
        (4, 64, 32, 64),
        (192, 49, 32, 49),
        (192, 49, 49, 32),
        (48, 49, 32, 49),
        (12, 50, 64, 50),
    ),
    # GroupQueryAttention, by the work of one head: decode steps over caches of 128 to 4096 rows with Qwen2.5-0.5B's
    # heads (14 over 2), Llama-3's (32 over 8), 128-wide ones and one key/value head per query head (Phi-3's); and
    # prefills of 32 to 384 tokens, each head sharing or not its key/value head
    *rows.group_query_attention(*((*heads, past, 1) for heads in _DECODE_HEADS for past in (128, 1024, 4096))),
    *rows.group_query_attention(*((*heads, 0, new) for heads in _PREFILL_HEADS for new in (32, 128, 384))),
    # pooling, in NCHWc after a convolution and in plain layout
    *rows.pools(
        ("MaxPool", 64, 112, 3, 2, 1, True),
        ("MaxPool", 96, 109, 3, 2, 0, True),
        ("MaxPool", 192, 56, 3, 2, 1, True),
        ("MaxPool", 256, 27, 3, 2, 0, True),
        ("MaxPool", 480, 28, 3, 2, 1, True),
        ("AveragePool", 192, 28, 3, 1, 1, True),
        ("AveragePool", 576, 14, 3, 1, 1, True),
        ("AveragePool", 128, 56, 2, 2, 0, True),
        ("MaxPool", 256, 13, 3, 2, 0, True),
        ("MaxPool", 512, 14, 2, 2, 0, True),
        ("MaxPool", 128, 32, 2, 2, 0, True),
        ("MaxPool", 24, 112, 3, 2, 1, False),
        ("AveragePool", 60, 28, 3, 2, 1, False),
        ("AveragePool", 64, 56, 3, 1, 1, False),
        ("MaxPool", 64, 112, 3, 2, 1, False),
    ),
    *rows.global_pools(
        ("GlobalAveragePool", 2048, 7, True),
        ("GlobalAveragePool", 1024, 7, True),
        ("GlobalAveragePool", 512, 7, True),
        ("GlobalAveragePool", 1000, 13, False),
        ("GlobalAveragePool", 64, 56, True),
        ("GlobalMaxPool", 1280, 7, True),
    ),
    # normalization
    *rows.batchnorms((64, 56), (128, 28), (256, 14), (512, 7), (256, 56), (640, 14)),
    *rows.norm_chains(
        batchnorm=[(64, 56), (96, 28)],
        # by the length of their rows, at least three of each (bin_points): ConvNeXt's and Swin's 96 channels (at
        # 56x56, and fewer positions) with 128; their 192 at 28x28 and DeiT-tiny's over 197 tokens with 256; their
        # 384 at 14x14 and Whisper-tiny's over 50 frames with 512; ViT's and BERT's 768 with 1024
        layernorm=[(3136, 96), (784, 96), (1024, 128)]
        + [(784, 192), (197, 192), (16, 256)]
        + [(196, 384), (50, 384), (50, 512)]
        + [(197, 768), (49, 768), (128, 1024)],
        skip_layernorm=[(197, 768), (49, 768), (128, 384), (16, 256)],
        instancenorm=[(64, 56), (32, 128), (256, 14)],
        lrn=[(96, 55), (64, 56), (192, 27), (256, 13)],
        # by the length of their rows, at least three of each (bin_points): Swin's 49-token windows in three
        # stages with rows of 64; BERT's and GPT-2's 128 tokens with ViT's and DeiT's 197; classifiers' 1000 classes
        softmax=[(1, 4, 64, 64)]
        + [(1, windows, 49, 49) for windows in (192, 96, 48)]
        + [(1, 8, 128, 128), (1, 12, 128, 128), (1, 12, 197, 197), (1, 3, 197, 197)]
        + [(rows, 1000) for rows in (1, 8, 32)],
    ),
    # elementwise and activations, over sizes spanning the cache levels
    *rows.elementwise(
        (1, 64, 16, 16),
        (1, 64, 56, 56),
        (1, 256, 56, 56),
        (1, 197, 768),
        (1, 128, 28, 28),
        (1, 32, 112, 112),
        per_channel=True,
    ),
    rows.chain("Clip 1x144x56x56", chains.clip_chain, (1, 144, 56, 56)),
    # activations, each kind on a transformer's and a convolutional network's shapes
    *rows.activations(
        ("Exp", (1, 197, 768)),
        ("Exp", (1, 12, 197, 197)),
        ("Elu", (1, 64, 56, 56)),
        ("Sigmoid", (1, 64, 56, 56)),
        ("Sigmoid", (1, 256, 14, 14)),
        ("Tanh", (1, 197, 768)),
        ("Tanh", (1, 64, 56, 56)),
        ("Erf", (1, 197, 768)),
        ("Erf", (1, 197, 3072)),
        ("Gelu", (1, 197, 3072)),
        ("Gelu", (1, 50, 512)),
        ("FastGelu", (1, 128, 3072)),
        ("FastGelu", (1, 50, 512)),
        ("Softplus", (1, 197, 768)),
        ("Sin", (1, 64, 56, 56)),
    ),
    # Pow: the tanh Gelu's cube (a square, RMS normalization's, runs as one class with it), and another exponent
    *rows.pows((3.0, (1, 128, 3072)), (3.0, (1, 50, 512))),
    *rows.pows((2.5, (1, 128, 512)), (0.5, (1, 64, 28, 28))),
    # QuickGelu: SiLU as onnxruntime fuses it (alpha 1, EfficientNet's) with Sigmoid, and CLIP's alpha on its own
    *rows.quick_gelus((1.0, (1, 96, 56, 56)), (1.0, (1, 32, 112, 112)), (1.702, (1, 197, 768)), (1.702, (1, 50, 3072))),
    # data movement
    *rows.reorders((64, 28), (64, 56), (32, 112), (96, 28), (256, 14), (512, 7), (768, 14), (1024, 7)),
    *rows.concats((2, 64, 28), (4, 64, 56), (2, 256, 14), (3, 128, 28), (2, 32, 128), (4, 128, 7)),
    rows.profile("Split 3x768 of 197x2304", graphs.split, ((1, 197, 2304), 3, -1), {"movement"}),
    rows.profile("Split 2x116 @28x28", graphs.split, ((1, 232, 28, 28), 2, 1), {"movement"}),
    rows.profile("Slice half of 1x256x56x56", graphs.slice_head, ((1, 256, 56, 56), 1, 128), {"movement"}),
    *rows.transposes(
        ((1, 197, 12, 64), (0, 2, 1, 3)),
        ((1, 197, 12, 64), (0, 2, 3, 1)),
        ((1, 12, 197, 64), (0, 2, 1, 3)),
        ((1, 4, 34, 28, 28), (0, 2, 1, 3, 4)),
        ((1, 64, 56, 56), (0, 2, 3, 1)),
        ((1, 768, 196), (0, 2, 1)),
        ((1, 2, 116, 14, 14), (0, 2, 1, 3, 4)),
        ((1, 8, 128, 64), (0, 2, 1, 3)),
        ((1, 8, 7, 8, 7, 96), (0, 1, 3, 2, 4, 5)),
        ((1, 128, 12, 64), (0, 2, 3, 1)),
        ((1, 56, 56, 96), (0, 3, 1, 2)),
        ((1, 28, 28, 192), (0, 3, 1, 2)),
        ((1, 14, 14, 384), (0, 3, 1, 2)),
        # batched (transpose_batched), read by one matrix's bytes (class_work.repeats): Swin's key transposes in
        # its first three stages, each window's 49 tokens moved after its heads' channels
        ((64, 49, 3, 32), (0, 2, 3, 1)),
        ((16, 49, 6, 32), (0, 2, 3, 1)),
        ((4, 49, 12, 32), (0, 2, 3, 1)),
    ),
    *rows.transposes(
        ((1, 28, 28, 3, 80), (0, 4, 3, 1, 2)),
        ((1, 14, 14, 2, 116), (0, 4, 3, 1, 2)),
        ((1, 56, 56, 4, 16), (0, 4, 3, 1, 2)),
        ((1, 7, 7, 3, 320), (0, 4, 3, 1, 2)),
        elem_type=TensorProto.INT8,
    ),
    *rows.resizes((64, 32, True), (128, 16, True), (32, 64, True), (256, 8, True)),
    *rows.resizes((64, 32, True), (128, 14, True), (24, 56, True), mode="linear"),
    *rows.resizes((64, 32, False), (128, 14, False), (24, 56, False), mode="linear"),
    *rows.reduces(
        ("ReduceMean", (1, 197, 768), (2,)),
        ("ReduceSum", (1, 256, 56, 56), (2, 3)),
        ("ReduceMax", (1, 1000), (1,)),
        ("ReduceMean", (1, 512, 14, 14), (2, 3)),
    ),
    # low precision: int8 convolutions, dynamic (ResNet's and MobileNet's, the deep ones on small outputs bound by
    # their weights) and static (QDQ fused into QLinearConv); a Cast is an elementwise node
    *rows.int8_convs(graphs.conv_integer, "ConvInteger", *_DYNAMIC_INT8_ROWS),
    *rows.int8_convs(graphs.qdq_conv, "QDQ Conv", *_STATIC_INT8_ROWS),
    # recurrent: a tagger's and a text recognizer's layers, and smaller and larger ones, on warm weights
    *rows.recurrent(
        ("LSTM", 128, 256, 256),
        ("LSTM", 32, 64, 128),
        ("LSTM", 64, 512, 512),
        ("LSTM", 64, 128, 64),
        ("GRU", 128, 256, 256),
        ("GRU", 32, 64, 128),
        ("GRU", 64, 512, 512),
        ("GRU", 64, 128, 64),
        ("RNN", 128, 256, 256),
        ("RNN", 32, 64, 128),
        ("RNN", 64, 512, 512),
    ),
)

_QUICK_BENCHES: tuple[Bench, ...] = (
    *rows.convs((32, 32, 28, 3, 1), (64, 64, 28, 1, 1), (64, 64, 14, 3, 1), (64, 64, 7, 3, 1), (64, 16, 28, 1, 1)),
    *rows.depthwise((64, 28, 1)),
    *rows.epilogues((32, 192, 28, 1, 1)),  # large enough that the Clip's pass stands out of the profiler's 1 us
    *rows.grouped((136, 28, 1, 4)),
    *rows.weight_waits((160, 960, 7, 1)),
    *rows.gemms((64, 128, 128), (1, 1024, 1000)),
    *rows.attention((4, 64, 32, 64)),
    *rows.pools(("MaxPool", 64, 56, 3, 2, 1, True), ("AveragePool", 64, 28, 3, 1, 1, False)),
    *rows.global_pools(("GlobalAveragePool", 512, 14, True)),
    *rows.batchnorms((64, 56)),
    *rows.norm_chains(
        batchnorm=[(16, 14)],
        layernorm=[(16, 64)],
        skip_layernorm=[(16, 64)],
        instancenorm=[(8, 14)],
        lrn=[(16, 14)],
        softmax=[(1, 2, 32, 32)],
    ),
    *rows.elementwise((1, 16, 14, 14), (1, 64, 28, 28), per_channel=False),
    *rows.activations(("Sigmoid", (1, 16, 14, 14))),
    *rows.recurrent(("LSTM", 16, 64, 64)),
    *rows.reorders((32, 28)),
    *rows.concats((2, 64, 56)),  # tens of microseconds, well above the profiler's resolution
    *rows.transposes(((1, 64, 56, 56), (0, 2, 1, 3))),  # 1.6 MB moved: well above MIN_PROFILED_S on a fast core too
    *rows.transposes(((1, 14, 14, 2, 116), (0, 4, 3, 1, 2)), elem_type=TensorProto.INT8),
    *rows.resizes((32, 28, True)),
    *rows.resizes((32, 28, True), (32, 28, False), mode="linear"),
    *rows.reduces(("ReduceMean", (1, 256, 28, 28), (2, 3))),
    *rows.int8_convs(graphs.conv_integer, "ConvInteger", (32, 32, 28, 3, 1), (64, 64, 14, 3, 64)),
    *rows.int8_convs(graphs.qdq_conv, "QDQ Conv", (32, 32, 28, 3, 1), (64, 64, 28, 3, 64)),
    *rows.matmul_nbits((1, 896, 4864, 0), (1, 896, 4864, 4), (32, 896, 896, 0), (32, 896, 896, 4)),
    *rows.group_query_attention((8, 2, 64, 256, 1), (8, 2, 64, 0, 32)),
)


def _peaks(n: int, conv: bool) -> tuple[Bench, ...]:
    """The fp32 peak benchmarks: an n^3 Gemm, and with ``conv`` a large 3x3 convolution (untailed)."""
    gemm = Bench("profile", f"Gemm {n}x{n}x{n}", graphs.gemm, (n, n, n), frozenset({"gemm"}), tail=False)
    if not conv:
        return (gemm,)
    return gemm, Bench(
        "profile", "Conv 128->128 3x3 @56x56", graphs.conv, (128, 128, 56, 3), frozenset({"conv"}), tail=False
    )


# A ResNet downsampling convolution (3x3, stride 2) at batch 32: its data (61 MiB) is larger than any cache, which
# the class benchmarks' is not. Its conv kernel gives dram_overlap; its NCHWc reorders join the reorder classes
# at DRAM sizes. A strided convolution reads four times the input per FLOP that a stride-1 one does and hides
# less of its DRAM traffic behind its computation: the figure errs toward traffic exposed.
_BATCHED_CONV = Bench(
    "profile",
    "Conv 128->128 3x3/2 @56x56, batch 32",
    graphs.conv,
    (128, 128, 56, 3, 2, 1, 32),
    REORDER_CLASSES,
    tail=False,
)

# The full suite measures every ceiling of the table of op classes.
_MEASURED = classes(part=None)

FULL = Suite(
    benches=_FULL_BENCHES,
    peaks=_peaks(1024, conv=True),
    batched_conv=_BATCHED_CONV,
    measures=_MEASURED,
    passes=16,
    reps=3,
    chain_target_s=0.004,
    overhead_lengths=(8, 208),
    flush_bytes=64 * MiB,
    matrix_size=1024,
    level_cap=None,
    probe_factors=(2, 4),
    dram_bounds=(256 * MiB, 1024 * MiB),
    dram_memory_share=0.25,
    reuse_fractions=(0.03125, 0.0625, 0.125, 0.25, 0.5, 0.75, 1.0, 2.0, 4.0),
    # subnormal floats: Swin-T's second stage's shifted windows (7x7 over 28x28) at its first stage's 3 heads
    masked_attention=(28, 7, 3, 32),
)

QUICK = Suite(
    benches=_QUICK_BENCHES,
    peaks=_peaks(256, conv=False),
    batched_conv=None,
    # no wide, stem, narrow grouped, plain depthwise, border (dense or depthwise) or single-position convolution,
    # per-channel chain, short product, activation but Sigmoid, recurrent op but LSTM, DRAM-sized reorder or
    # Transpose of the innermost axis is in it; onnxruntime runs its plain layout pool in NCHWc, and its reorders
    # and the quantization of its int8 convolutions' small inputs run shorter than the profiler resolves
    measures=_MEASURED
    - {"conv_wide", "conv_stem", "conv_grouped_narrow", "depthwise_plain", "depthwise_border"}
    - {"conv_vector", "conv_1d"}
    - {"pool_nchw", "broadcast", "reorder", "transpose_inner", "transpose_batched"}
    - {"quantize", "gemm_short"}
    - (ACTIVATION_CLASSES - {"activation_sigmoid"})
    - (RECURRENT_CLASSES - {"lstm"}),
    passes=2,
    reps=2,
    chain_target_s=0.0015,
    overhead_lengths=(8, 48),
    flush_bytes=8 * MiB,
    matrix_size=256,
    level_cap=4 * MiB,
    probe_factors=(),
    dram_bounds=(16 * MiB, 64 * MiB),
    dram_memory_share=None,
    reuse_fractions=(0.125, 0.5),
)
