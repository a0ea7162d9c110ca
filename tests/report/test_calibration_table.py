"""The calibration summary's lines for the device's curves."""

from __future__ import annotations

import dataclasses

from onnxroof.devices import WeightWait
from onnxroof.report.calibration import calibration_table
from tests.helpers import calibrated_host


def test_the_calibration_summary_gives_a_convolutions_wait_for_its_weights_by_their_bytes():
    assert "waits for its weights" not in calibration_table(calibrated_host())
    dev = dataclasses.replace(
        calibrated_host(), conv_weight_wait=WeightWait(((618_240, 0.91), (9_439_232, 0.45)), "calibrated: test")
    )
    line = "a convolution waits for its weights' DRAM read, by their bytes: 618 kB:0.91 9.44 MB:0.45"
    assert line in calibration_table(dev)
