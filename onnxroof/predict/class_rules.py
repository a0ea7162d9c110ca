"""Classification by ordered rules: the class a node refines into and a reason a user can read.

A :class:`Refinement` reads the facts of a node that its base class splits by (:attr:`Refinement.facts`: shapes,
layout, operands) and tries its :class:`Rule` s in order: the first whose predicate holds gives the class, and its
reason template, formatted with the facts as ``f``, says why ("196 output positions, between 100 and 400"). The
last rule of every refinement holds for any node, so every node gets a class.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

from onnxroof.costs import NodeView
from onnxroof.ir import Tensor

__all__ = ["Classification", "Refinement", "Rule", "always", "known_shape"]

F = TypeVar("F")


class Classification(NamedTuple):
    """A node's op class and why it has it; ``str()`` gives ``"cls: reason"``."""

    cls: str
    reason: str

    def __str__(self) -> str:
        return f"{self.cls}: {self.reason}"


def always(_: object) -> bool:
    """The predicate of a refinement's last rule: it holds for every node."""
    return True


@dataclass(frozen=True, slots=True)
class Rule(Generic[F]):
    """One step of a refinement: where ``when`` holds for a node's facts, the node is of class ``cls``, for the
    reason ``reason`` (a ``str.format`` template of the facts, named ``f``)."""

    cls: str
    when: Callable[[F], bool]
    reason: str


@dataclass(frozen=True)
class Refinement(Generic[F]):
    """How the nodes of one base class (the class an op registers with its cost function) split into classes:
    ``facts`` reads what the rules look at from the node, and the first of ``rules`` that holds gives the class.
    The last rule holds always (:func:`always`)."""

    facts: Callable[[NodeView], F]
    rules: tuple[Rule[F], ...]

    def __post_init__(self) -> None:
        if not self.rules or self.rules[-1].when is not always:
            raise ValueError("a refinement's last rule must hold for every node (always)")

    @property
    def classes(self) -> frozenset[str]:
        """Every class the rules may give."""
        return frozenset(rule.cls for rule in self.rules)

    def rule_for(self, facts: F) -> Rule[F]:
        """The first rule that holds for ``facts``."""
        return next(rule for rule in self.rules if rule.when(facts))

    def classify(self, view: NodeView) -> Classification:
        """The class of ``view`` and its reason."""
        facts = self.facts(view)
        rule = self.rule_for(facts)
        return Classification(rule.cls, rule.reason.format(f=facts))

    def op_class(self, view: NodeView) -> str:
        """The class of ``view`` alone, its reason not formatted."""
        return self.rule_for(self.facts(view)).cls


def known_shape(t: Tensor | None) -> tuple[int, ...] | None:
    """A tensor's shape, None when the tensor is absent or its shape unknown."""
    return t.shape if t is not None and t.shape is not None else None
