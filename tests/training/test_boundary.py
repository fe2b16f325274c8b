"""The boundary between training and the rest: dead options stay out, typed seams stay typed."""

import inspect

from backends.rate_limit import Pace
from training.losses import LossSettings, clipped_turns, importance_ratio, policy_loss, turn_mean


def test_dead_loss_options_and_helpers_are_gone():
    # turn_ids was never passed by training (a row is one turn); for_loss served tests only
    # (tests/training/loss_helpers.py); Pace.reserve had no caller (earliest + book do its work).
    for function in (policy_loss, importance_ratio, clipped_turns, turn_mean):
        assert "turn_ids" not in inspect.signature(function).parameters, function.__name__
    assert not hasattr(LossSettings, "for_loss")
    assert not hasattr(Pace, "reserve")
