"""Prediction: a loaded graph and a device -> per-node roofline times and the whole model's (``analysis``), with
the plain roofline (``roofline``) or onnxruntime's CPU engine model on a calibrated host (``engine``)."""
