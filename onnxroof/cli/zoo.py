"""onnxroof zoo: the built-in models."""

from __future__ import annotations

import argparse

HELP = "list the built-in models"
DESCRIPTION = """Built-in models, usable as zoo:NAME or zoo:NAME?batch=B&size=S; then the decoders, one step with
open batch and sequence dims (for 'onnxroof llm', or analyze with --dim): NAME-QUANT in onnxruntime GenAI's layout,
NAME-hf-QUANT as Hugging Face optimum exports it."""


def configure(parser: argparse.ArgumentParser) -> None:
    """The command takes no options."""


def run(args: argparse.Namespace) -> int:
    import model_zoo

    for name in model_zoo.names():
        print(f"zoo:{name:<14} {model_zoo.describe(name)}")
    for name in model_zoo.decoder_names():
        print(f"zoo:{name:<14} {model_zoo.describe_decoder(name)}")
    return 0
