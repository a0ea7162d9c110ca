"""A GPU engine's run as the host issues it: the host issues the kernels one after the other, and the GPU runs each
once it has been issued and the one before it has ended.

Where the host issues faster than the kernels run, the kernels run back to back and the host's time is hidden;
where it is slower (small kernels, an eager framework's dispatch), the GPU waits for it and the run takes the
host's time. A run starts with the host's first issue: nothing of it is hidden.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["streamed"]


def streamed(steps: Iterable[tuple[float, float]]) -> float:
    """Seconds from the first issue to the last kernel's end, for (host seconds to issue it, GPU seconds it
    runs) per kernel, in the order the host issues them."""
    issued = ended = 0.0
    for host_s, gpu_s in steps:
        issued += host_s
        ended = max(issued, ended) + gpu_s
    return ended
