"""The boundary between training and the rest: dead options stay out, typed seams stay typed."""

import inspect
from typing import get_type_hints

from backends.rate_limit import Pace
from training.losses import LossSettings, clipped_turns, importance_ratio, policy_loss, turn_mean


def test_dead_loss_options_and_helpers_are_gone():
    # turn_ids was never passed by training (a row is one turn); for_loss served tests only
    # (tests/training/loss_helpers.py); Pace.reserve had no caller (earliest + book do its work).
    for function in (policy_loss, importance_ratio, clipped_turns, turn_mean):
        assert "turn_ids" not in inspect.signature(function).parameters, function.__name__
    assert not hasattr(LossSettings, "for_loss")
    assert not hasattr(Pace, "reserve")


def test_the_hf_backend_is_the_trainable_model_training_names(tmp_path):
    from backends.base import TrainableModel
    from backends.hf import HFBackend
    from backends.tiny import build_tiny_model
    from training import setup

    backend = HFBackend(build_tiny_model(tmp_path / "tiny"), threads=1)
    assert isinstance(backend, TrainableModel)  # every member training uses, present (mypy checks the types)
    assert get_type_hints(setup.TrainingSetup)["backend"] is TrainableModel
    assert get_type_hints(setup.load_backend)["return"] is TrainableModel
    assert not isinstance(object(), TrainableModel)
