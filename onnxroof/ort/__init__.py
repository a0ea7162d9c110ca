"""Everything that runs onnxruntime: sessions as a session spec asks for them on runnable copies of a model
(``session_spec``, ``sessions``), the graph onnxruntime runs (``optimized``), a run for the shapes inference leaves
unknown (``run_for_shapes``), whole-model timing (``measure``), per-kernel profiles mapped back to the graph
(``profile``, ``mapping``), this host's calibrated roofline (``calibrate``), the reference block read for the
machine's speed (``reference``) and predicted against measured (``validate``, ``agreement``). onnxruntime itself is
imported where a session is made."""
