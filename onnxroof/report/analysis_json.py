"""The JSON contract of an Analysis as text: exactly ``json.dumps(analysis.to_dict(), indent=2) + "\\n"``, made
without passing tens of thousands of node dicts through json's pure-Python indenting encoder.

``json.dumps`` with ``indent`` never uses json's C encoder: it walks every node's dict item by item, which on a
large graph costs several times the analysis itself. Two facts give the same text at a fraction of that cost:

- Nodes that the analysis costs once as a group (the repeated blocks of a network) share their cost, prediction
  and engine note, the very same objects. A node's dict depends on its name, op type, domain, output shape and
  those objects alone (see ``NodeResult.to_dict``), so its text after the name is made once per distinct set and
  reused.
- A dict of scalars nested at a known depth is what json's C encoder writes when its item separator is a comma,
  a newline and the indentation of that depth: the indented layout, without the indenting encoder.
"""

from __future__ import annotations

import functools
import itertools
import json
import operator
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from onnxroof.predict.analysis import Analysis, NodeResult

__all__ = ["to_json"]

INDENT = "  "  # json.dumps(..., indent=2)
NODE_DEPTH = 2  # the document is depth 0, its "nodes" list depth 1, each node's dict depth 2
NAME_OPEN = "{\n" + INDENT * (NODE_DEPTH + 1) + '"name": '  # a node's text up to its name
NODE_SEPARATOR = ",\n" + INDENT * NODE_DEPTH  # between two nodes of the list
ENCODE_STRING: Callable[[str], str] = json.encoder.encode_basestring_ascii  # how json.dumps writes a str
# The types json writes as scalars, exactly: a subclass (an enum, a numpy float) takes the general way.
SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})

NAME, OP_TYPE, DOMAIN, COST, PREDICTION, SUPPORTED, ENGINE, OUTPUT_SHAPE = map(
    operator.attrgetter, ("name", "op_type", "domain", "cost", "prediction", "supported", "engine", "output_shape")
)


def to_json(analysis: Analysis) -> str:
    """``Analysis.to_dict()`` as ``json.dumps(..., indent=2)`` writes it, and a final newline."""
    document = replace(analysis, nodes=()).to_dict()  # everything but the nodes, which are encoded below
    parts = ["{"]
    for key, value in document.items():
        parts += [",\n" if len(parts) > 1 else "\n", INDENT, ENCODE_STRING(key), ": "]
        if key == "nodes":
            parts += nodes_json(analysis.nodes)
        else:
            parts.append(value_text(value, 1))
    parts.append("\n}\n")
    return "".join(parts)  # joined once: the nodes' text runs to tens of megabytes on a large graph


def nodes_json(nodes: Sequence[NodeResult]) -> list[str]:
    """The "nodes" list, at depth 1 of the document, as pieces of text to join.

    Nodes with the same op type, domain, output shape, cost, prediction, support and engine note differ only in
    their names.
    The nodes of a group share those very objects, and the analysis holds each of them while this runs, so
    their identities key the text after the name, made once per key. What remains per node, a lookup and the
    encoding of its name, runs in map and zip rather than in a Python loop.
    """
    if not nodes:
        return ["[]"]
    keys = list(
        zip(
            map(OP_TYPE, nodes),
            map(DOMAIN, nodes),
            map(id, map(COST, nodes)),
            map(id, map(PREDICTION, nodes)),
            map(SUPPORTED, nodes),
            map(id, map(ENGINE, nodes)),
            map(OUTPUT_SHAPE, nodes),
        )
    )
    representatives = dict(zip(keys, nodes))  # one node per key
    rests = {key: after_name(node) for key, node in representatives.items()}
    links = {key: rest + NODE_SEPARATOR + NAME_OPEN for key, rest in rests.items()}  # a node's end, the next's start
    pieces = list(map(links.__getitem__, keys))
    pieces[-1] = rests[keys[-1]]  # the last node ends the list
    names = map(ENCODE_STRING, map(NAME, nodes))
    return ["[", NODE_SEPARATOR[1:], NAME_OPEN, *itertools.chain.from_iterable(zip(names, pieces)), "\n", INDENT, "]"]


def after_name(node: NodeResult) -> str:
    """A node's text after its name, to its closing brace, at the depth of the nodes list's items."""
    return dict_text(node.to_dict(), NODE_DEPTH)[len(NAME_OPEN) + len(ENCODE_STRING(node.name)) :]


def value_text(value: Any, depth: int) -> str:
    """``value`` as ``json.dumps(value, indent=2)`` writes it where it is nested ``depth`` levels deep."""
    if isinstance(value, dict):
        return dict_text(value, depth)
    # JSON strings never hold a raw newline (json escapes it), so every newline is layout: a value nested one
    # level deeper has each line after its first indented by one more step.
    return json.dumps(value, indent=len(INDENT)).replace("\n", "\n" + INDENT * depth)


def dict_text(value: dict[Any, Any], depth: int) -> str:
    """A dict nested ``depth`` levels deep, as ``json.dumps(..., indent=2)`` writes it.

    Without ``indent`` json uses its C encoder and writes the separators it is given verbatim, so a dict of
    scalars comes out in the indented layout when the item separator is a comma, a newline and the indentation of
    the dict's items.
    """
    if not value or set(map(type, value)) != {str}:  # json's own way for an empty dict or keys it converts
        return json.dumps(value, indent=len(INDENT)).replace("\n", "\n" + INDENT * depth)
    inner = "\n" + INDENT * (depth + 1)
    if SCALAR_TYPES.issuperset(map(type, value.values())):
        body = scalar_dict_encoder(depth).encode(value)[1:-1]
    else:
        body = ("," + inner).join(ENCODE_STRING(k) + ": " + value_text(v, depth + 1) for k, v in value.items())
    return "{" + inner + body + "\n" + INDENT * depth + "}"


@functools.cache
def scalar_dict_encoder(depth: int) -> json.JSONEncoder:
    """json's C encoder, writing a dict of scalars nested ``depth`` levels deep in the indented layout."""
    return json.JSONEncoder(separators=(",\n" + INDENT * (depth + 1), ": "))
