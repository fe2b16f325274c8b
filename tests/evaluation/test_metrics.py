"""The Wilson interval: SciPy's figures, computed without SciPy (a base install summarises runs)."""

import math
import subprocess
import sys

import pytest
from scipy.stats import binomtest

from tsmg.apps.evaluation.metrics import wilson_interval


@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.99])
def test_wilson_interval_is_scipys(confidence):
    for trials in [1, 2, 3, 7, 20, 101, 500]:
        for successes in range(trials + 1):
            expected = binomtest(successes, trials).proportion_ci(confidence_level=confidence, method="wilson")
            low, high = wilson_interval(successes, trials, confidence)
            assert low == pytest.approx(expected.low, abs=1e-12), (successes, trials)
            assert high == pytest.approx(expected.high, abs=1e-12), (successes, trials)


def test_wilson_interval_of_no_trials_is_undefined():
    assert all(math.isnan(end) for end in wilson_interval(0, 0))


def test_wilson_interval_needs_no_scipy():
    # The base dependencies have no SciPy (it is the eval extra): `tsmg view` and `tsmg rollout` summarise anyway.
    code = "import sys; sys.modules['scipy'] = None\nfrom tsmg.apps.evaluation.metrics import wilson_interval\n"
    code += "print(wilson_interval(3, 10))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    low, high = (float(x) for x in result.stdout.strip("()\n").split(","))
    assert 0.1 < low < 0.3 < high < 0.7
