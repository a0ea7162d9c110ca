"""The one table of op classes: each class declared once, every fallback chain ending at a class that falls back to
none, and every list of classes the code uses equal to what the table says."""

from __future__ import annotations

import pytest

from onnxroof.devices import CEILING_NAMES, OP_CLASSES, PART_CEILINGS
from onnxroof.devices.classes import CLASSES, ROOFS, TABLE, TRAITS, WORK_UNITS, classes, refined_from, with_trait
from onnxroof.ort.calibrate import classes as calibration
from onnxroof.ort.calibrate import suite
from onnxroof.predict import class_work, op_classes, term_times
from tests.helpers import T, make_node


def test_each_class_is_declared_once_with_known_values() -> None:
    assert len(CLASSES) == len(TABLE)
    for c in TABLE:
        assert c.roof in ROOFS, c.name
        assert c.work in WORK_UNITS, c.name
        assert c.traits <= set(TRAITS), c.name
        assert c.base in CLASSES, c.name
        assert c.doc and "\n" not in c.doc, c.name


@pytest.mark.parametrize("name", list(CLASSES))
def test_a_fallback_chain_ends_at_a_class_that_falls_back_to_none(name: str) -> None:
    chain = [name]
    while (following := CLASSES[chain[-1]].fallback) is not None:
        assert following in CLASSES, f"{' -> '.join(chain)} -> {following}: not in the table"
        assert following not in chain, f"{' -> '.join([*chain, following])}: a cycle"
        chain.append(following)
    assert chain[-1] in ROOTS


# The classes a chain ends at: a device that holds a ceiling for each of them holds one for every class.
ROOTS = {
    "conv",
    "depthwise",
    "gemm",
    "pool",
    "layernorm",
    "lrn",
    "softmax",
    "elementwise",
    "activation",
    "movement",
    "reduce",
    "recurrent",
}


def test_the_roots_are_the_classes_without_a_fallback() -> None:
    assert {c.name for c in TABLE if c.fallback is None} == ROOTS


def test_the_device_schema_lists_the_tables_classes_in_its_order() -> None:
    assert tuple(c.name for c in TABLE if not c.part) == OP_CLASSES
    assert PART_CEILINGS == ("epilogue",)
    assert CEILING_NAMES == OP_CLASSES + PART_CEILINGS


def test_the_fallbacks_and_refinements_are_the_tables() -> None:
    assert {c.name: c.fallback for c in TABLE if c.fallback is not None} == op_classes.CLASS_FALLBACK
    assert set(op_classes.REFINEMENTS) == {c.base for c in TABLE if c.base != c.name}
    for base, refinement in op_classes.REFINEMENTS.items():
        # a base that is itself a class refined from another (matmul, which the fused attention ops register) keeps
        # the nodes no rule of its own takes
        kept = {base} if base in CLASSES and CLASSES[base].base != base else set()
        assert refinement.classes == refined_from(base) | kept, base


def test_the_calibrations_classes_are_the_tables() -> None:
    assert {c.name for c in TABLE if c.roof == "compute"} == calibration.COMPUTE_CLASSES
    assert {c.name for c in TABLE if c.roof == "memory"} == calibration.MEMORY_CLASSES
    assert set(CEILING_NAMES) == calibration.COMPUTE_CLASSES | calibration.MEMORY_CLASSES
    # a depthwise 1x1 is a scale and shift: a memory class, not among the convolutions a benchmark keeps
    assert "batchnorm" in refined_from("conv") and "batchnorm" not in calibration.CONV_CLASSES
    assert {"gemm", "gemm_short", "gemv", "matmul", *calibration.NBITS_CLASSES} == calibration.PRODUCT_CLASSES
    assert {"gemm_nbits", "gemv_nbits", "gemm_nbits_int8", "gemv_nbits_int8"} == calibration.NBITS_CLASSES
    assert {"attention", "attention_decode"} == calibration.ATTENTION_CLASSES
    assert calibration.INT8_CONV_CLASSES | {"gemm_nbits_int8", "gemv_nbits_int8"} == calibration.INT8_CLASSES
    assert {"conv_integer", "conv_integer_grouped", "qconv", "qconv_depthwise"} == calibration.INT8_CONV_CLASSES
    assert suite.FULL.measures == set(CEILING_NAMES)


def test_the_engines_class_sets_are_the_tables() -> None:
    assert with_trait("weight_wait") == term_times.WEIGHT_WAIT_CLASSES
    assert {
        "conv",
        "conv1x1",
        "conv_mid",
        "conv_small",
        "conv_narrow",
        "conv_stem",
        "conv_wide",
    } == term_times.WEIGHT_WAIT_CLASSES
    assert with_trait("read_cold") == {"gemv", "gemv_nbits", "gemv_nbits_int8"}
    assert with_trait("streaming") == {
        *refined_from("elementwise", "movement", "reorder"),
    }
    with pytest.raises(ValueError, match="traits"):
        with_trait("fast")


def test_classes_selects_by_roof_and_part() -> None:
    assert classes(part=True) == {"epilogue"}
    assert classes(part=None) == set(CEILING_NAMES)
    assert "epilogue" in classes(roof="memory", part=None) and "epilogue" not in classes(roof="memory")


@pytest.mark.parametrize("name", list(CLASSES))
def test_every_classs_unit_of_work_is_counted(name: str) -> None:
    """A unit of the table without a count in class_work would raise here; on unknown shapes every count is 1."""
    assert class_work.repeats(make_node("Unknown", [T(None)], [T(None)]), name) == 1
