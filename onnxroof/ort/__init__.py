"""Everything that runs onnxruntime: sessions on runnable copies of a model (``sessions``), whole-model timing
(``measure``), per-kernel profiles mapped back to the graph (``profile``, ``mapping``), this host's calibrated
roofline (``calibrate``), the reference block read for the machine's speed (``reference``) and predicted against
measured (``validate``, ``agreement``). onnxruntime itself is imported where a session is made."""
