"""A node's op class and its reason, where a user reads them: the JSON's engine object and analyze's table with
-v."""

from __future__ import annotations

import json

from onnxroof.devices import load_device
from onnxroof.load import load_graph
from onnxroof.predict.analysis import Analysis, analyze_graph
from onnxroof.report.analysis import render, to_table
from tests.helpers import CONV, ELEMENTWISE, calibrated_host, small_conv_net

# small_conv_net's first Conv reads 3 channels with a 3x3 kernel: a stem under 25 taps. Its Gemm is one row
# (a [1, 8] input) by a weight.
STEM = "conv_narrow: a stem: 3 input channels (under 16) and a 3x3 kernel (under 25 taps)"
ONE_ROW = "gemv: a product by a weight, one row"


def on_engine() -> Analysis:
    graph = load_graph(small_conv_net())
    return analyze_graph(graph, calibrated_host({"conv": CONV, "elementwise": ELEMENTWISE}), engine=True)


def test_the_json_engine_object_holds_the_class_and_its_reason() -> None:
    nodes = {n["name"]: n for n in json.loads(render(on_engine(), "json"))["nodes"]}
    assert f"{nodes['conv1']['engine']['class']}: {nodes['conv1']['engine']['reason']}" == STEM
    assert f"{nodes['fc']['engine']['class']}: {nodes['fc']['engine']['reason']}" == ONE_ROW
    assert nodes["fc"]["engine"]["op_class"] == "gemv"


def test_the_verbose_table_ends_with_each_nodes_class_and_why() -> None:
    table = to_table(on_engine(), top=0, classes=True)
    assert header_of(table)[-1] == "class"
    lines = table.splitlines()
    assert next(line for line in lines if " conv1 " in line).endswith(STEM)
    assert next(line for line in lines if " fc " in line).endswith(ONE_ROW)


def header_of(table: str) -> list[str]:
    return next(line for line in table.splitlines() if line.lstrip().startswith("#")).split()


def test_the_plain_table_and_a_table_without_engine_notes_have_no_class_column() -> None:
    plain = to_table(on_engine(), top=0)
    assert header_of(plain)[-1] == "share" and STEM not in plain
    catalog = analyze_graph(load_graph(small_conv_net()), load_device("v100-sxm2"))
    assert header_of(to_table(catalog, top=0, classes=True))[-1] == "share"
