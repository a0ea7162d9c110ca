"""Export the benchmark set: models users run, exported to ONNX the ways users export them, from random weights.

Each model is built with torch, torchvision, timm or transformers from its configuration (random weights: no
download) and exported with static input shapes (batch 1; 128 tokens for text, 224x224 images, 1 s of 16 kHz
audio) by the TorchScript-based exporter (opset 17) or the dynamo one (opset 18). The two give different
graphs: the TorchScript exporter writes the model's shape arithmetic as nodes (Shape, Gather, Concat,
Constant: several times the dynamo exporter's node count on Swin-T) and its own sequence of ops for
attention and windowing; the dynamo exporter's graph is optimized by onnxscript first. Several models are
exported both ways, as separate entries, and two by the TorchScript exporter at opset 14 as well, the default
of torch releases before 2.1, where LayerNormalization is written as its decomposition (ReduceMean, Sub, Pow,
Sqrt, Div).

The folder gets one .onnx file per model and a ``manifest.json``: per model its name, family, exporter, file,
inputs (name, shape, dtype) and a one-line description. tools/accuracy.py reads it (``--set benchmark``) and
tools/op_census.py counts the op types of its models. A model whose export fails is said and left out; the
others go on.

This script runs only in an environment with torch (and timm, transformers, onnx, onnxscript for the dynamo
exporter); the project itself never needs them.

usage: python tools/export_models.py [--set benchmark|published] [--out DIR] [--only NAME,NAME] [--list]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TEXT_LEN = 128  # tokens
IMAGE = 224  # pixels a side
AUDIO = 16000  # samples: 1 s at 16 kHz
VOCAB = 30000  # token ids are drawn below it: within every text model's vocabulary


@dataclass(frozen=True)
class Spec:
    """One entry of the set: how to build the model and which exporter writes it."""

    name: str
    family: str
    exporter: str  # "torchscript" or "dynamo"
    build: Callable[[], tuple[Any, tuple[Any, ...], list[str]]]  # (module, example inputs, input names)
    description: str
    opset: int | None = None  # None: 17 for the TorchScript exporter, 18 for the dynamo one
    dynamic_batch: bool = False  # TorchScript exporter: every input's first dim a symbolic "batch"


def default_dir(which: str = "benchmark") -> Path:
    """The set's folder: ``benchmark-models/`` (``published-models/`` for the published set) in onnxroof's cache
    folder."""
    sys.path.insert(0, str(ROOT))
    from onnxroof.ort.calibrate.host import cache_dir

    return cache_dir() / f"{which}-models"


# ------------------------------------------------------------------------------------------------ inputs


def _image(size: int = IMAGE, channels: int = 3) -> Any:
    import torch

    return torch.randn(1, channels, size, size)


def _tokens(length: int = TEXT_LEN, vocab: int = VOCAB) -> Any:
    import torch

    return torch.randint(0, vocab, (1, length), dtype=torch.int64)


def _mask(length: int = TEXT_LEN) -> Any:
    import torch

    return torch.ones(1, length, dtype=torch.int64)


# ------------------------------------------------------------------------------------------------ builders


def _torchvision(name: str, **kwargs: Any) -> Callable[[], tuple[Any, tuple[Any, ...], list[str]]]:
    def build() -> tuple[Any, tuple[Any, ...], list[str]]:
        import torchvision

        model = getattr(torchvision.models, name)(weights=None, **kwargs)
        return model, (_image(),), ["input"]

    return build


def _segmentation(name: str) -> Callable[[], tuple[Any, tuple[Any, ...], list[str]]]:
    def build() -> tuple[Any, tuple[Any, ...], list[str]]:
        import torch
        import torchvision

        class OutOnly(torch.nn.Module):
            """The segmentation head's output alone (torchvision's models return a dict)."""

            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, x: Any) -> Any:
                return self.inner(x)["out"]

        inner = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None)
        return OutOnly(inner), (_image(),), ["input"]

    return build


def _timm(name: str) -> Callable[[], tuple[Any, tuple[Any, ...], list[str]]]:
    def build() -> tuple[Any, tuple[Any, ...], list[str]]:
        import timm

        return timm.create_model(name, pretrained=False), (_image(),), ["input"]

    return build


def _torchvision_at(name: str, size: int) -> Callable[[], tuple[Any, tuple[Any, ...], list[str]]]:
    def build() -> tuple[Any, tuple[Any, ...], list[str]]:
        import torchvision

        return getattr(torchvision.models, name)(weights=None), (_image(size),), ["input"]

    return build


def _bert_head(head: str, length: int, **sizes: int) -> Callable[[], tuple[Any, tuple[Any, ...], list[str]]]:
    """A transformers BERT (RoBERTa for ``head`` "roberta-classifier") with a task head, ``length`` tokens."""

    def build() -> tuple[Any, tuple[Any, ...], list[str]]:
        import transformers as tf

        if head == "roberta-classifier":
            config = tf.RobertaConfig(vocab_size=50265, max_position_embeddings=514, num_labels=3)
            model = tf.RobertaForSequenceClassification(config)
        else:
            config = tf.BertConfig(**sizes)
            model = {"qa": tf.BertForQuestionAnswering, "mlm": tf.BertForMaskedLM}[head](config)
        model.config._attn_implementation = "eager"
        names = ["input_ids", "attention_mask"]
        return _hidden_state(model, names), (_tokens(length), _mask(length)), names

    return build


def _hidden_state(inner: Any, names: list[str]) -> Any:
    """A transformers model that takes its inputs by name and returns its last hidden state (or logits) alone."""
    import torch

    class FirstOutput(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: Any) -> Any:
            return self.inner(**dict(zip(names, args)), return_dict=False)[0]

    return FirstOutput(inner)


def _text_encoder(kind: str) -> Callable[[], tuple[Any, tuple[Any, ...], list[str]]]:
    def build() -> tuple[Any, tuple[Any, ...], list[str]]:
        import transformers as tf

        config = {
            "bert": lambda: tf.BertConfig(),
            "distilbert": lambda: tf.DistilBertConfig(),
            "roberta": lambda: tf.RobertaConfig(vocab_size=50265, max_position_embeddings=514),
            "albert": lambda: tf.AlbertConfig(hidden_size=768, num_attention_heads=12, intermediate_size=3072),
        }[kind]()
        model = tf.AutoModel.from_config(config, attn_implementation="eager")
        names = ["input_ids", "attention_mask"]
        return _hidden_state(model, names), (_tokens(), _mask()), names

    return build


def _text_decoder(kind: str) -> Callable[[], tuple[Any, tuple[Any, ...], list[str]]]:
    def build() -> tuple[Any, tuple[Any, ...], list[str]]:
        import transformers as tf

        config = {
            "gpt2": lambda: tf.GPT2Config(use_cache=False),
            "opt": lambda: tf.OPTConfig(use_cache=False),  # opt-125m's sizes
            "llama": lambda: tf.LlamaConfig(
                hidden_size=512,
                intermediate_size=1376,
                num_hidden_layers=4,
                num_attention_heads=8,
                num_key_value_heads=8,
                vocab_size=32000,
                use_cache=False,
            ),
        }[kind]()
        model = tf.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
        # With an attention mask, as generation feeds one (without, transformers derives packed-sequence
        # boundaries from the positions, an op the TorchScript exporter cannot write).
        names = ["input_ids", "attention_mask"]
        return _hidden_state(model, names), (_tokens(), _mask()), names

    return build


def _wav2vec2() -> tuple[Any, tuple[Any, ...], list[str]]:
    import torch
    import transformers as tf

    model = tf.Wav2Vec2Model(tf.Wav2Vec2Config())  # wav2vec2-base's sizes
    return _hidden_state(model, ["input_values"]), (torch.randn(1, AUDIO),), ["input_values"]


def _whisper_encoder() -> tuple[Any, tuple[Any, ...], list[str]]:
    import torch
    import transformers as tf

    # whisper-tiny's sizes; its encoder takes a fixed number of mel frames (two per position): 50 positions
    # are 1 s of audio (100 frames of 10 ms).
    config = tf.WhisperConfig(
        d_model=384,
        encoder_layers=4,
        encoder_attention_heads=6,
        decoder_layers=4,
        decoder_attention_heads=6,
        encoder_ffn_dim=1536,
        decoder_ffn_dim=1536,
        num_mel_bins=80,
        max_source_positions=50,
    )
    encoder = tf.WhisperModel(config).get_encoder()
    return _hidden_state(encoder, ["input_features"]), (torch.randn(1, 80, 100),), ["input_features"]


def _recurrent(cell: str) -> Callable[[], tuple[Any, tuple[Any, ...], list[str]]]:
    def build() -> tuple[Any, tuple[Any, ...], list[str]]:
        import torch

        class Tagger(torch.nn.Module):
            """Token embedding, two recurrent layers and a per-token classifier: a sequence tagger."""

            def __init__(self) -> None:
                super().__init__()
                self.embed = torch.nn.Embedding(10000, 256)
                rnn = torch.nn.LSTM if cell == "lstm" else torch.nn.GRU
                self.rnn = rnn(256, 256, num_layers=2, batch_first=True)
                self.head = torch.nn.Linear(256, 32)

            def forward(self, ids: Any) -> Any:
                out, _ = self.rnn(self.embed(ids))
                return self.head(out)

        return Tagger().eval(), (_tokens(vocab=10000),), ["input_ids"]

    return build


def _crnn() -> tuple[Any, tuple[Any, ...], list[str]]:
    import torch

    class CRNN(torch.nn.Module):
        """A text-line recognizer: a VGG-style conv stack over a 32x128 grey image, its columns read by a
        bidirectional two-layer LSTM, a per-column classifier over 37 characters (CTC's layout)."""

        def __init__(self) -> None:
            super().__init__()
            nn = torch.nn

            def block(cin: int, cout: int, pool: tuple[int, int] | None) -> list[Any]:
                layers: list[Any] = [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU()]
                return layers + ([nn.MaxPool2d(pool, pool)] if pool else [])

            self.conv = nn.Sequential(
                *block(1, 64, (2, 2)),
                *block(64, 128, (2, 2)),
                *block(128, 256, None),
                *block(256, 256, (2, 1)),
                *block(256, 512, None),
                *block(512, 512, (2, 1)),
            )
            self.rnn = nn.LSTM(512 * 2, 256, num_layers=2, bidirectional=True, batch_first=True)
            self.head = nn.Linear(512, 37)

        def forward(self, x: Any) -> Any:
            f = self.conv(x)  # (1, 512, 2, 32)
            f = f.permute(0, 3, 1, 2).flatten(2)  # (1, 32, 1024): one step per column
            out, _ = self.rnn(f)
            return self.head(out)

    return CRNN().eval(), (torch.randn(1, 1, 32, 128),), ["input"]


def _unet() -> tuple[Any, tuple[Any, ...], list[str]]:
    import torch

    nn = torch.nn

    def block(cin: int, cout: int) -> Any:
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1),
            nn.BatchNorm2d(cout),
            nn.ReLU(),
            nn.Conv2d(cout, cout, 3, padding=1),
            nn.BatchNorm2d(cout),
            nn.ReLU(),
        )

    class UNet(nn.Module):
        """A four-level U-Net (16 to 128 filters) with transposed-conv upsampling, for 2-class masks."""

        def __init__(self) -> None:
            super().__init__()
            widths = [16, 32, 64, 128]
            self.down = nn.ModuleList()
            cin = 3
            for w in widths:
                self.down.append(block(cin, w))
                cin = w
            self.mid = block(widths[-1], widths[-1] * 2)
            self.up = nn.ModuleList()
            self.dec = nn.ModuleList()
            cin = widths[-1] * 2
            for w in reversed(widths):
                self.up.append(nn.ConvTranspose2d(cin, w, 2, stride=2))
                self.dec.append(block(2 * w, w))
                cin = w
            self.out = nn.Conv2d(widths[0], 2, 1)

        def forward(self, x: Any) -> Any:
            skips = []
            for d in self.down:
                x = d(x)
                skips.append(x)
                x = torch.nn.functional.max_pool2d(x, 2)
            x = self.mid(x)
            for up, dec, skip in zip(self.up, self.dec, reversed(skips)):
                x = dec(torch.cat([up(x), skip], dim=1))
            return self.out(x)

    return UNet().eval(), (_image(),), ["input"]


def _mlp() -> tuple[Any, tuple[Any, ...], list[str]]:
    import torch

    nn = torch.nn
    layers: list[Any] = []
    width = 1024
    for cin in (512, width, width, width):
        layers += [nn.Linear(cin, width), nn.GELU()]
    model = nn.Sequential(*layers, nn.Linear(width, 10))
    return model.eval(), (torch.randn(1, 512),), ["input"]


def _voice_activity() -> tuple[Any, tuple[Any, ...], list[str]]:
    import torch

    nn = torch.nn

    def encoder(bins: int) -> Any:
        """A learned short-time transform (a strided 1-d convolution) and four convolutions over its frames."""
        return nn.Sequential(
            nn.Conv1d(1, bins, 2 * bins, stride=bins // 2, padding=bins),
            nn.ReLU(),
            nn.Conv1d(bins, 128, 3, padding=1),
            nn.ReLU(),
            nn.Conv1d(128, 64, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv1d(64, 64, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv1d(64, 128, 3, padding=1),
            nn.ReLU(),
        )

    class VoiceActivity(nn.Module):
        """A voice-activity detector of silero-vad's shape: an If on the sample rate the caller passes picks the
        16 kHz or the 8 kHz encoder (each its own weights), an LSTM of 128 over the encoded frames in each
        branch, and one speech probability."""

        def __init__(self) -> None:
            super().__init__()
            self.encoder16 = encoder(128)
            self.encoder8 = encoder(64)
            self.rnn16 = nn.LSTM(128, 128, batch_first=True)
            self.rnn8 = nn.LSTM(128, 128, batch_first=True)
            self.head = nn.Linear(128, 1)

        def forward(self, x: torch.Tensor, sr: torch.Tensor) -> torch.Tensor:
            if bool(sr == 16000):
                out, _ = self.rnn16(self.encoder16(x.unsqueeze(1)).transpose(1, 2))
            else:
                out, _ = self.rnn8(self.encoder8(x[:, :256].unsqueeze(1)).transpose(1, 2))
            return torch.sigmoid(self.head(out[:, -1]))

    scripted = torch.jit.script(VoiceActivity().eval())
    return scripted, (torch.randn(1, 512), torch.tensor(16000, dtype=torch.int64)), ["input", "sr"]


def _small_recurrent(cell: str) -> Callable[[], tuple[Any, tuple[Any, ...], list[str]]]:
    def build() -> tuple[Any, tuple[Any, ...], list[str]]:
        import torch

        class KeywordTagger(torch.nn.Module):
            """49 frames of 40 features read by one recurrent layer of 128 and a classifier over 12 keywords."""

            def __init__(self) -> None:
                super().__init__()
                rnn = torch.nn.LSTM if cell == "lstm" else torch.nn.GRU
                self.rnn = rnn(40, 128, batch_first=True)
                self.head = torch.nn.Linear(128, 12)

            def forward(self, x: Any) -> Any:
                out, _ = self.rnn(x)
                return self.head(out[:, -1])

        return KeywordTagger().eval(), (torch.randn(1, 49, 40),), ["input"]

    return build


def _lenet() -> tuple[Any, tuple[Any, ...], list[str]]:
    import torch

    nn = torch.nn
    model = nn.Sequential(
        nn.Conv2d(1, 16, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 7 * 7, 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )
    return model.eval(), (torch.randn(1, 1, 28, 28),), ["input"]


def _ds_cnn() -> tuple[Any, tuple[Any, ...], list[str]]:
    import torch

    nn = torch.nn

    def separable(channels: int) -> list[Any]:
        return [
            nn.Conv2d(channels, channels, 3, padding=1, groups=channels),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
            nn.Conv2d(channels, channels, 1),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
        ]

    model = nn.Sequential(
        nn.Conv2d(1, 172, (10, 4), stride=(2, 1), padding=(5, 1)),
        nn.BatchNorm2d(172),
        nn.ReLU(),
        *[layer for _ in range(4) for layer in separable(172)],
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(172, 12),
    )
    return model.eval(), (torch.randn(1, 1, 49, 10),), ["input"]


def _small_mlp() -> tuple[Any, tuple[Any, ...], list[str]]:
    import torch

    nn = torch.nn
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    return model.eval(), (torch.randn(1, 784),), ["input"]


# ------------------------------------------------------------------------------------------------ the set


def _both(
    name: str, family: str, build: Callable[[], tuple[Any, tuple[Any, ...], list[str]]], description: str
) -> list[Spec]:
    return [
        Spec(name, family, "torchscript", build, description),
        Spec(f"{name}-dynamo", family, "dynamo", build, description),
    ]


def _one(
    name: str, family: str, build: Callable[[], tuple[Any, tuple[Any, ...], list[str]]], description: str
) -> list[Spec]:
    return [Spec(name, family, "torchscript", build, description)]


SET: list[Spec] = [
    *_both("resnet18", "resnet", _torchvision("resnet18"), "torchvision ResNet-18, 224x224"),
    *_one("resnet50", "resnet", _torchvision("resnet50"), "torchvision ResNet-50, 224x224"),
    *_one("resnext50", "resnet", _torchvision("resnext50_32x4d"), "torchvision ResNeXt-50 32x4d, 224x224"),
    *_both("mobilenet_v2", "mobile-cnn", _torchvision("mobilenet_v2"), "torchvision MobileNetV2, 224x224"),
    *_one("mobilenet_v3_small", "mobile-cnn", _torchvision("mobilenet_v3_small"), "torchvision MobileNetV3-S, 224x224"),
    *_both("efficientnet_b0", "mobile-cnn", _torchvision("efficientnet_b0"), "torchvision EfficientNet-B0, 224x224"),
    *_one("shufflenet_v2", "mobile-cnn", _torchvision("shufflenet_v2_x1_0"), "torchvision ShuffleNetV2 1.0x, 224x224"),
    *_one("densenet121", "other-cnn", _torchvision("densenet121"), "torchvision DenseNet-121, 224x224"),
    *_one("regnet_y_400mf", "other-cnn", _torchvision("regnet_y_400mf"), "torchvision RegNetY-400MF, 224x224"),
    *_both("convnext_tiny", "other-cnn", _torchvision("convnext_tiny"), "torchvision ConvNeXt-T, 224x224"),
    *_one(
        "lraspp_mobilenet_v3",
        "segmentation",
        _segmentation("lraspp_mobilenet_v3_large"),
        "torchvision LR-ASPP MobileNetV3-L segmentation, 224x224",
    ),
    *_one(
        "deeplabv3_mobilenet_v3",
        "segmentation",
        _segmentation("deeplabv3_mobilenet_v3_large"),
        "torchvision DeepLabV3 MobileNetV3-L segmentation, 224x224",
    ),
    *_both("unet_small", "segmentation", _unet, "a four-level U-Net, 16-128 filters, transposed-conv upsampling"),
    *_one("vit_b_16", "vision-transformer", _torchvision("vit_b_16"), "torchvision ViT-B/16, 224x224"),
    *_both("swin_t", "vision-transformer", _torchvision("swin_t"), "torchvision Swin-T (windowed attention), 224x224"),
    *_one("deit_tiny", "vision-transformer", _timm("deit_tiny_patch16_224"), "timm DeiT-Ti/16, 224x224"),
    *_both("bert_base", "text-encoder", _text_encoder("bert"), "transformers BERT-base encoder, 128 tokens"),
    Spec(
        "bert_base-opset14",
        "text-encoder",
        "torchscript",
        _text_encoder("bert"),
        "transformers BERT-base encoder, 128 tokens, opset 14 (LayerNormalization decomposed)",
        opset=14,
    ),
    *_one("distilbert", "text-encoder", _text_encoder("distilbert"), "transformers DistilBERT encoder, 128 tokens"),
    *_one("roberta_base", "text-encoder", _text_encoder("roberta"), "transformers RoBERTa-base encoder, 128 tokens"),
    *_one("albert_base", "text-encoder", _text_encoder("albert"), "transformers ALBERT-base encoder, 128 tokens"),
    *_both("gpt2", "text-decoder", _text_decoder("gpt2"), "transformers GPT-2 small with LM head, causal, 128 tokens"),
    Spec(
        "gpt2-opset14",
        "text-decoder",
        "torchscript",
        _text_decoder("gpt2"),
        "transformers GPT-2 small with LM head, causal, 128 tokens, opset 14 (LayerNormalization decomposed)",
        opset=14,
    ),
    *_one("opt_125m", "text-decoder", _text_decoder("opt"), "transformers OPT-125M with LM head, causal, 128 tokens"),
    *_both(
        "llama_tiny",
        "text-decoder",
        _text_decoder("llama"),
        "transformers Llama, 4 layers of width 512, with LM head, causal, 128 tokens",
    ),
    *_both("wav2vec2_base", "speech", _wav2vec2, "transformers wav2vec2-base encoder, 1 s of 16 kHz audio"),
    *_one(
        "whisper_tiny_encoder",
        "speech",
        _whisper_encoder,
        "transformers Whisper-tiny encoder, 1 s of audio (100 mel frames)",
    ),
    *_both("lstm_tagger", "recurrent", _recurrent("lstm"), "embedding, 2-layer LSTM 256, per-token classifier"),
    *_one("gru_tagger", "recurrent", _recurrent("gru"), "embedding, 2-layer GRU 256, per-token classifier"),
    *_one("crnn", "recurrent", _crnn, "CRNN text recognizer: VGG-style convs, 2-layer BiLSTM 256, 32x128 image"),
    *_one("mlp", "mlp", _mlp, "a 5-layer MLP, width 1024, GELU, one sample"),
    *_one("mixer_s16", "mlp", _timm("mixer_s16_224"), "timm MLP-Mixer S/16, 224x224"),
    *_one("resmlp_12", "mlp", _timm("resmlp_12_224"), "timm ResMLP-12, 224x224"),
    *_one(
        "voice_activity",
        "small-recurrent",
        _voice_activity,
        "silero-vad-shaped detector: If on the sample rate, a conv encoder and an LSTM 128 in each branch",
    ),
    *_both(
        "kws_lstm", "small-recurrent", _small_recurrent("lstm"), "keyword spotter: 49 frames, one LSTM 128, 12 classes"
    ),
    *_one("kws_gru", "small-recurrent", _small_recurrent("gru"), "keyword spotter: 49 frames, one GRU 128, 12 classes"),
    *_one(
        "ds_cnn", "small-classifier", _ds_cnn, "DS-CNN keyword spotter: 49x10 features, four separable blocks of 172"
    ),
    *_both("lenet", "small-classifier", _lenet, "a LeNet-style digit classifier, 28x28 grey image"),
    *_one("mlp_small", "small-classifier", _small_mlp, "a 3-layer MLP 784-1024-1024-10, one sample"),
]


# ------------------------------------------------------------------------------------------------ export


_LARGE = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096}
# The models of tools/published.toml's measurements, at the sizes they were measured at (batch 1: the measurements'
# batches are set when they are predicted). tools/published.py predicts them; no CPU benchmark runs them.
PUBLISHED: list[Spec] = [
    Spec("efficientnet_b0", "published", "torchscript", _torchvision("efficientnet_b0"), "EfficientNet-B0, 224x224"),
    Spec(
        "efficientnet_b4", "published", "torchscript", _torchvision_at("efficientnet_b4", 380), "EfficientNet-B4, 380"
    ),
    Spec("bert_large_qa_384", "published", "torchscript", _bert_head("qa", 384, **_LARGE), "BERT-large QA, 384"),
    Spec("bert_base_qa_128", "published", "torchscript", _bert_head("qa", 128), "BERT-base QA head, 128 tokens"),
    Spec("bert_base_mlm_128", "published", "torchscript", _bert_head("mlm", 128), "BERT-base masked LM, 128 tokens"),
    Spec(
        "bert_6l_qa_384",
        "published",
        "torchscript",
        _bert_head("qa", 384, num_hidden_layers=6),
        "BERT, 6 layers of width 768, QA head, 384 tokens",
    ),
    # DeepLearningExamples' Triton deployment of BERT exports at "--onnx-opset 13" (its BERT/triton/*/runner/
    # pipeline_impl.py) with the batch dynamic: LayerNormalization (opset 17) decomposed, as the engines ran it.
    Spec(
        "bert_large_qa_384-opset13",
        "published",
        "torchscript",
        _bert_head("qa", 384, **_LARGE),
        "BERT-large QA, 384 tokens, opset 13",
        opset=13,
        dynamic_batch=True,
    ),
    Spec(
        "bert_6l_qa_384-opset13",
        "published",
        "torchscript",
        _bert_head("qa", 384, num_hidden_layers=6),
        "BERT, 6 layers of width 768, QA head, 384 tokens, opset 13",
        opset=13,
        dynamic_batch=True,
    ),
    Spec(
        "roberta_base_cls_384",
        "published",
        "torchscript",
        _bert_head("roberta-classifier", 384),
        "RoBERTa-base, 3-class head, 384 tokens",
    ),
]
SETS = {"benchmark": SET, "published": PUBLISHED}


def export(spec: Spec, path: Path) -> list[dict[str, Any]]:
    """Export one model to ``path``; its inputs as the manifest lists them."""
    import onnx
    import torch

    torch.manual_seed(0)
    module, args, names = spec.build()
    module = module.eval()
    # Not under torch.no_grad(): without gradients, nn.MultiheadAttention takes its fused fast path, an op the
    # TorchScript exporter cannot write (users export with gradients on, as here).
    if spec.exporter == "dynamo":
        opset = spec.opset or 18
        program = torch.onnx.export(module, args, dynamo=True, opset_version=opset, input_names=names)
        program.save(str(path), external_data=False)
    else:
        opset = spec.opset or 17
        axes = {name: {0: "batch"} for name in names} if spec.dynamic_batch else None
        torch.onnx.export(
            module, args, str(path), dynamo=False, opset_version=opset, input_names=names, dynamic_axes=axes
        )
    model = onnx.load(str(path), load_external_data=False)
    inputs = []
    initializers = {i.name for i in model.graph.initializer}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        t = value.type.tensor_type
        inputs.append(
            {
                "name": value.name,
                "shape": [d.dim_value for d in t.shape.dim],
                "dtype": onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name,
            }
        )
    return inputs


def onnx_opset(path: Path) -> int:
    """The default domain's opset version the exported file imports."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=None, help="folder (default: benchmark-models/ in the cache)")
    parser.add_argument("--only", default=None, help="comma-separated names to export (the others are kept)")
    parser.add_argument("--list", action="store_true", help="list the set and exit")
    parser.add_argument(
        "--set", default="benchmark", choices=tuple(SETS), help="the benchmark set, or tools/published.py's models"
    )
    args = parser.parse_args(argv)
    chosen = SETS[args.set]
    if args.list:
        for spec in chosen:
            print(f"{spec.name:<24} {spec.family:<20} {spec.exporter:<12} {spec.description}")
        return 0
    out: Path = args.out or default_dir(args.set)
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "manifest.json"
    entries: dict[str, dict[str, Any]] = {}
    if manifest_path.exists():  # a partial re-export keeps the others' entries
        entries = {e["name"]: e for e in json.loads(manifest_path.read_text())["models"]}
        for entry in entries.values():  # written before entries carried their opset
            if "opset" not in entry and (out / entry["file"]).exists():
                entry["opset"] = onnx_opset(out / entry["file"])
    wanted = set(args.only.split(",")) if args.only else {s.name for s in chosen}
    unknown = wanted - {s.name for s in chosen}
    if unknown:
        parser.error(f"not in the set: {', '.join(sorted(unknown))}")
    failed: list[tuple[str, str]] = []
    for spec in chosen:
        if spec.name not in wanted:
            continue
        path = out / f"{spec.name}.onnx"
        start = time.perf_counter()
        try:
            inputs = export(spec, path)
        except Exception as exc:  # one model's failure leaves the others to export
            reason = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}"
            print(f"{spec.name:<24} FAILED  {reason}", flush=True)
            traceback.print_exc(limit=3, file=sys.stderr)
            failed.append((spec.name, reason))
            entries.pop(spec.name, None)
            path.unlink(missing_ok=True)
            continue
        finally:
            gc.collect()
        size = path.stat().st_size / 1e6
        print(f"{spec.name:<24} {spec.exporter:<12} {size:7.1f} MB  {time.perf_counter() - start:5.1f} s", flush=True)
        entries[spec.name] = {
            "name": spec.name,
            "family": spec.family,
            "exporter": spec.exporter,
            "opset": onnx_opset(path),
            "file": path.name,
            "inputs": inputs,
            "description": spec.description,
        }
        order = {s.name: i for i, s in enumerate(chosen)}
        models = sorted(entries.values(), key=lambda e: order.get(e["name"], len(order)))
        manifest_path.write_text(json.dumps({"models": models}, indent=1) + "\n")
    if failed:
        print(f"\n{len(failed)} export(s) failed:")
        for name, reason in failed:
            print(f"  {name}: {reason}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
