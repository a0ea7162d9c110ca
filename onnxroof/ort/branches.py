"""If nodes replaced by one of their branches, so that a run returns the tensors computed inside a branch.

onnxruntime returns graph outputs only, and a tensor inside an If branch cannot be one. With the If replaced by
the branch's nodes in its place (its weights among the graph's, each of its outputs passed on by an Identity to
the If's output of that position), the branch's tensors are top-level values that can be. ONNX forbids a
subgraph to reuse a name of an enclosing scope, so a branch's names do not clash with the graph's.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import NamedTuple

from onnx import AttributeProto, GraphProto, NodeProto, TensorProto, helper

from onnxroof.ir import op_domain

THEN, ELSE = "then_branch", "else_branch"


class Variant(NamedTuple):
    """A graph with some If nodes replaced by a branch: its nodes, in order, and the weights of the branches
    it took in (the graph's own weights are the model's)."""

    nodes: Sequence[NodeProto]
    weights: Sequence[TensorProto]


def is_if(node: NodeProto) -> bool:
    return node.op_type == "If" and not op_domain(node.domain)


def branch(node: NodeProto, name: str) -> GraphProto:
    """An If node's branch of that attribute name (an empty graph where it has none)."""
    return next((a.g for a in node.attribute if a.name == name and a.type == AttributeProto.GRAPH), GraphProto())


def produced(nodes: Sequence[NodeProto]) -> Iterator[str]:
    """The names of the node outputs among ``nodes`` and, through If branches at any depth, inside them."""
    for node in nodes:
        yield from (o for o in node.output if o)
        if is_if(node):
            for name in (THEN, ELSE):
                yield from produced(branch(node, name).node)


def ifs_reaching(variant: Variant, wanted: Collection[str]) -> list[int]:
    """The positions of the variant's If nodes with a wanted tensor inside a branch (at any depth)."""
    return [
        index
        for index, node in enumerate(variant.nodes)
        if is_if(node) and any(name in wanted for side in (THEN, ELSE) for name in produced(branch(node, side).node))
    ]


def inline(variant: Variant, choices: Mapping[int, str]) -> Variant:
    """``variant`` with the If node at each position of ``choices`` replaced by the branch chosen there."""
    nodes: list[NodeProto] = []
    weights = list(variant.weights)
    for index, node in enumerate(variant.nodes):
        if index not in choices:
            nodes.append(node)
            continue
        chosen = branch(node, choices[index])
        nodes.extend(chosen.node)
        weights.extend(chosen.initializer)
        for inner, outer in zip(chosen.output, node.output):
            if outer:
                nodes.append(helper.make_node("Identity", [inner.name], [outer], name=f"{node.name}/{outer}"))
    return Variant(nodes, weights)
