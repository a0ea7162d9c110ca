"""onnxroof ops: the op types that have cost functions."""

from __future__ import annotations

import argparse

HELP = "list the ops with cost functions"
DESCRIPTION = "Every op type (domain::op outside the default domain) that has a cost function."


def configure(parser: argparse.ArgumentParser) -> None:
    """The command takes no options."""


def run(args: argparse.Namespace) -> int:
    from onnxroof.costs import registered_ops

    ops = registered_ops()
    print("\n".join(ops))
    print(f"\n{len(ops)} ops have cost functions; any other op is reported as unsupported and charged its bytes.")
    return 0
