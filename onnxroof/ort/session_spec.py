"""A session spec: how onnxruntime runs a model, as every session onnxroof makes is given it.

The execution provider, the intra-op thread count, the graph optimization level and whether a provider's silent
fallback to the CPU is accepted travel together from ``--provider``, ``--threads``, ``--opt-level`` and
``--allow-fallback`` to every session that ``measure``, ``validate`` and the profiler make. A spec is checked
when it is made, so that a bad setting is refused before any model is read. It imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from onnxroof.errors import UserError

PROVIDERS: Mapping[str, str] = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}
OPT_LEVELS: tuple[str, ...] = ("disable", "basic", "extended", "all")


def provider_name(provider: str) -> str:
    """'cpu' / 'cuda' (or a full onnxruntime provider name) -> the onnxruntime provider name."""
    key = provider.lower().removesuffix("executionprovider")
    if key in PROVIDERS:
        return PROVIDERS[key]
    raise UserError(f"unknown execution provider {provider!r}", "use cpu or cuda")


@dataclass(frozen=True)
class SessionSpec:
    """An onnxruntime session's settings: ``provider`` ('cpu', 'cuda' or a full provider name), ``threads``
    intra-op threads (one inter-op thread, sequential execution), ``opt_level`` (one of OPT_LEVELS) and
    ``allow_fallback`` (accept a session that runs on the CPU when another provider was asked for). A setting
    that no session can have is a UserError when the spec is made."""

    provider: str = "cpu"
    threads: int = 1
    opt_level: str = "all"
    allow_fallback: bool = False

    def __post_init__(self) -> None:
        provider_name(self.provider)
        if self.threads < 1:
            raise UserError(f"threads must be at least 1, got {self.threads}", "pass --threads 1 or more")
        if self.opt_level not in OPT_LEVELS:
            raise UserError(f"unknown optimization level {self.opt_level!r}", "use one of " + ", ".join(OPT_LEVELS))

    @property
    def provider_name(self) -> str:
        """The onnxruntime name of the provider asked for ('CPUExecutionProvider', ...)."""
        return provider_name(self.provider)


# The CPU provider, one thread, every graph optimization, no fallback: a session that says nothing else.
DEFAULT_SESSION = SessionSpec()
