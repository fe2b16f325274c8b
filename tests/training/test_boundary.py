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


def test_policy_loss_takes_its_step_figures_as_one_object_and_has_no_in_batch_fallback():
    import pytest
    import torch

    from tests.training.loss_helpers import settings_for
    from training.losses import StepFigures

    parameters = inspect.signature(policy_loss).parameters
    assert {"denominator", "sequence_ids", "sequence_log_ratio", "sequence_tokens", "clipped_fraction"}.isdisjoint(
        parameters
    )
    new, old, advantages, mask = torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1), torch.ones(1, 2, dtype=torch.bool)
    with pytest.raises(ValueError, match="sequence-level ratio needs the step's sequence_log_ratio"):
        policy_loss(new, old, advantages, mask, settings_for("gspo"))  # training always passes the step's own
    with pytest.raises(ValueError, match="SORL's normalisation needs the step's clipped_fraction"):
        policy_loss(new, old, advantages, mask, settings_for("sorl"))
    step = StepFigures.of_batch(new, old, advantages, mask, settings_for("gspo"))
    assert policy_loss(new, old, advantages, mask, settings_for("gspo"), step).loss.item() == pytest.approx(-1.0)


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


def test_rtpo_is_a_rollout_shape_and_the_old_spelling_still_works_with_a_warning():
    import pytest

    from training.config import TrainConfig
    from training.credit import CREDIT_ASSIGNERS

    assert "rtpo" not in CREDIT_ASSIGNERS  # a rollout source, not a credit formula
    base = {"model": {"spec": "tiny"}}
    new = TrainConfig.model_validate({**base, "rollout": {"game_id": "FrozenLake-v0", "shape": "rtpo"}})
    with pytest.warns(FutureWarning, match="credit.name 'rtpo'.*write rollout.shape: rtpo"):
        old = TrainConfig.model_validate({**base, "rollout": {"game_id": "FrozenLake-v0"}, "credit": {"name": "rtpo"}})
    assert old == new and (new.rollout.shape, new.credit.name) == ("rtpo", "ms-grpo")
    with pytest.raises(ValueError, match="rollout.shape 'rtpo' normalises each turn's branches as a group"):
        TrainConfig.model_validate({**new.model_dump(), "credit": {"name": "marshal"}})


def test_the_rollout_sources_import_in_one_direction():
    # training.rollout.sources is the base the other sources build on: it imports none of them, not even
    # inside a function (the choice among them is training.rollout.build').
    import ast
    from pathlib import Path

    import training.rollout.sources

    tree = ast.parse(Path(training.rollout.sources.__file__).read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not imported & {"training.rollout.rtpo", "training.rollout.async_loop", "training.rollout.build"}
