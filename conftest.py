"""Settings for the whole test suite (tests and the packages' doctests), made before anything is imported.

``dtype: auto`` is pinned to float32 (``TSMG_AUTO_DTYPE``, inherited by the suite's subprocesses):
on a CPU with AMX-BF16 it would be bfloat16, and the suite's exact comparisons (recorded against
recomputed log-probabilities, micro-batches against one batch, byte-identical runs against a
recorded reference) hold to float32 rounding. The bfloat16 paths are tested where a test asks for
bfloat16 by name, and ``tests/backends/test_hf_dtype.py`` unsets the pin to test the detection.
"""

import os

os.environ["TSMG_AUTO_DTYPE"] = "float32"
