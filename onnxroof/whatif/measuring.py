"""Timing a variant on the machine a host device describes: what the what-if commands' ``--measure`` may time,
where, and how.

Only a calibrated host profile can be measured: ``host``, or a device file that ``onnxroof calibrate -o FILE``
wrote. Its calibration names the CPU, the onnxruntime provider and the threads it was measured with, so the
variant is run there as the profile was measured (its thread count is the session's intra-op threads). A
catalog device is a datasheet that nothing here runs on, so measuring on one is refused.

In this process or a local pool, a measurement is of this machine only: a profile of another machine (another
CPU model string, or a provider this onnxruntime lacks) is refused, with the way to reach it: a Dask worker on
that machine that declares the device's worker resource (``dask_executor.device_resource``), which a
measurement task asks for, so that only such a worker runs it. Measurements on one machine run one at a time
(two at once would slow each other down): a local pool's measurements run in this process, and a worker runs as
many at once as units of the resource it declares (one, as the hint starts it).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from onnx import ModelProto

from onnxroof.devices import Device
from onnxroof.errors import UserError
from onnxroof.whatif.dask_executor import device_resource
from onnxroof.whatif.executors import Executor, InProcess, ProcessPool

__all__ = [
    "check_measurable",
    "describes_this_machine",
    "is_local",
    "measurement_resources",
    "median_time",
    "one_at_a_time",
]


def is_local(executor: Executor | None) -> bool:
    """Whether ``executor`` runs its tasks on this machine: in this process (None too) or its local pool."""
    return executor is None or isinstance(executor, (InProcess, ProcessPool))


def one_at_a_time(executor: Executor | None) -> Executor:
    """The executor measurements run through: a local one's in this process, one after the other (a pool would
    time several on the same cores at once); any other as it is (its workers' resources say how many at once)."""
    if executor is None or is_local(executor):
        return InProcess()
    return executor


def measurement_resources(device: Device) -> dict[str, float]:
    """What a measurement on ``device`` asks of a worker: one unit of ``device:KEY``, which only the workers on
    that device's machine declare."""
    return {device_resource(device.key): 1}


def describes_this_machine(device: Device) -> bool:
    """Whether ``device`` is a profile of this machine: a calibration on the CPU this machine's calibration would
    name, with a provider this onnxruntime has."""
    from onnxroof.ort.calibrate import cpu_model

    calibration = device.calibration
    return calibration is not None and calibration.cpu == cpu_model() and _provider_here(calibration.provider)


def _provider_here(provider: str) -> bool:
    """Whether this machine's onnxruntime offers ``provider`` (the CPU's always does)."""
    import onnxruntime

    from onnxroof.ort.session_spec import PROVIDERS, provider_name

    return provider.lower() == "cpu" or (
        provider.lower() in PROVIDERS and provider_name(provider) in onnxruntime.get_available_providers()
    )


def check_measurable(devices: Sequence[Device], local: bool) -> None:
    """A UserError for the first device a measurement cannot run on: one that is no calibrated host and, where
    the measurements run on this machine (``local``), a host profile of another machine."""
    for device in devices:
        if device.calibration is None:
            raise UserError(
                f"--measure times a device on its own machine: {device.spec()} is a datasheet device, not a host",
                "drop --measure to predict only, or measure on host or a host device file "
                "(`onnxroof calibrate -o FILE` on that machine)",
            )
        if local and not describes_this_machine(device):
            raise UserError(
                f"--measure on {device.spec()}: it describes {device.calibration.cpu} "
                f"({device.calibration.provider}), not this machine",
                f"time it on its own machine: --executor ADDRESS with a worker there started with "
                f"`dask worker ADDRESS --resources {device_resource(device.key)}=1`",
            )


def median_time(model: ModelProto, device: Device, feeds_path: str | os.PathLike[str] | None = None) -> float:
    """The whole model's median time per run (seconds) with onnxruntime on this machine, in a session of the
    host profile's provider and threads, on random inputs or those of the .npz at ``feeds_path``."""
    from onnxroof.ort.measure import measure
    from onnxroof.ort.session_spec import SessionSpec
    from onnxroof.ort.sessions import runnable_model

    calibration = device.calibration
    if calibration is None:
        raise UserError(f"{device.spec()} is no calibrated host: nothing here runs on it", "measure on host")
    session = SessionSpec(provider=calibration.provider, threads=calibration.threads)
    return measure(runnable_model(model), session, feeds_path=feeds_path).median_s
