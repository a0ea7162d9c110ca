"""Variants of a model compared: a rewrite with its checks, two models side by side, a sweep over batch, input
size, precision and device, and the search for the rewrites that pay on a device.

It sits above ``predict``, ``ort`` and ``passes`` and below ``report``: each function here returns a frozen value
that ``report`` renders and the command line prints.
"""
