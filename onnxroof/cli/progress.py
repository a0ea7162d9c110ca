"""The progress display of a command: on stderr, on a terminal only, for work that takes more than a moment.

One ``Progress`` per command. The library reports through callbacks and never prints: ``progress`` itself is the
``(done, total)`` callback of counted work (nodes costed, analyses, devices, samples), ``stage`` the callback of a
named step, and ``calibrating`` the ``(done, total)`` callback a device resolution calibrates this machine through,
which first says why the command takes a while. tqdm draws the bar (imported only once there is one to draw).
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

__all__ = ["CALIBRATING", "DELAY_S", "REDRAW_S", "Progress"]

# Said once, on the first benchmark of a calibration that a command other than `calibrate` starts.
CALIBRATING = "calibrating this machine (about 2 minutes, once per CPU and thread count)"
DELAY_S = 0.5  # a display appears only for work that lasts longer than this
REDRAW_S = 0.1  # and is redrawn at most this often


class Progress:
    """A one-line display on ``stream`` (stderr by default), shown only where it is a terminal: the label and a
    step (``stage``), or a bar of counts (calling it, or ``calibrating``). ``close`` clears it."""

    def __init__(self, label: str, unit: str = "nodes", stream: TextIO | None = None) -> None:
        self.label = label
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = bool(isatty and isatty())
        self._bar: Any = None  # the tqdm bar on the line now
        self._kind: tuple[str, str | None, int | None] | None = None  # its label, unit and total
        self._said_calibrating = False

    def stage(self, text: str) -> None:
        """A named step of the work."""
        if self.enabled:
            self._line(self.label, None, None).set_description_str(f"{self.label}: {text}")

    def __call__(self, done: int, total: int) -> None:
        """``done`` of ``total`` items of counted work, in this command's unit."""
        if self.enabled:
            self._count(self.label, self.unit, done, total)

    def calibrating(self, done: int, total: int) -> None:
        """A calibration of this machine, started by resolving the device ``host``: said once, then counted."""
        if not self.enabled:
            return
        if not self._said_calibrating:
            self._said_calibrating = True
            self.close()
            self.stream.write(CALIBRATING + "\n")
            self.stream.flush()
        self._count("calibrating", "benchmarks", done, total)

    def close(self) -> None:
        """Clear the line."""
        if self._bar is not None:
            self._bar.close()
        self._bar, self._kind = None, None

    def _count(self, label: str, unit: str, done: int, total: int) -> None:
        bar = self._line(label, unit, total)
        bar.update(max(0, min(done, total) - bar.n))

    def _line(self, label: str, unit: str | None, total: int | None) -> Any:
        """The bar for this kind of display, a new one where the kind changes (a step after counts, other counts)."""
        kind = (label, unit, total)
        if self._kind == kind:
            return self._bar
        self.close()
        from tqdm import tqdm

        counted = unit is not None
        self._bar = tqdm(
            total=total,
            desc=label,
            unit=unit or "",
            file=self.stream,
            leave=False,
            delay=DELAY_S if counted else 0,  # a step is shown at once: nothing updates it later
            mininterval=REDRAW_S,
            dynamic_ncols=True,
            bar_format="{desc}: {bar:24} {n_fmt}/{total_fmt} {unit} [{elapsed}<{remaining}]" if counted else "{desc}",
        )
        self._kind = kind
        return self._bar
