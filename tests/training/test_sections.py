"""Training components take their own config sections, not the whole TrainConfig.

Only :class:`training.async_loop.AsyncRollouts` keeps the whole configuration: its worker process
rebuilds the backend and engine from it.
"""

import inspect

import pytest
from test_trainer import make_config, tiny_model  # noqa: F401  (tiny_model: the session's model)

from training.async_loop import AsyncRollouts
from training.config import DistillConfig, LossConfig
from training.distill import Teacher
from training.distributed import World
from training.engines import check_rollout
from training.losses import LossSettings
from training.rtpo import ReverseTurnRollouts
from training.setup import set_up
from training.sources import GroupRollouts, RolloutSource
from training.update import PolicyUpdate


def annotations(function):
    """Each parameter's annotation as written (the modules use postponed annotations: strings)."""
    return {name: str(parameter.annotation) for name, parameter in inspect.signature(function).parameters.items()}


@pytest.mark.parametrize(
    ("function", "sections"),
    [
        (PolicyUpdate.__init__, {"optim": "OptimConfig", "loss": "LossConfig", "distill": "DistillConfig | None"}),
        (Teacher.load, {"distill": "DistillConfig"}),
        (RolloutSource.__init__, {"rollout": "RolloutConfig", "run": "RunConfig"}),
        (GroupRollouts.__init__, {"rollout": "RolloutConfig", "run": "RunConfig"}),
        (ReverseTurnRollouts.__init__, {"rollout": "RolloutConfig", "run": "RunConfig"}),
        (check_rollout, {"rollout": "RolloutConfig"}),
    ],
)
def test_components_take_their_sections_not_the_whole_config(function, sections):
    found = annotations(function)
    assert not any("TrainConfig" in annotation for annotation in found.values()), found
    assert {name: found.get(name) for name in sections} == sections


def test_only_the_async_source_keeps_the_whole_config_for_its_worker():
    assert annotations(AsyncRollouts.__init__)["config"] == "TrainConfig"
    assert "config" in annotations(PolicyUpdate.from_config)


def test_the_update_built_from_sections_is_the_one_from_config(tiny_model, tmp_path):  # noqa: F811
    config = make_config(
        tmp_path / "run",
        tiny_model,
        loss={"name": "clip-higher", "aggregation": "constant", "old_logprobs": "recompute"},
        optim={"micro_batch_size": 3},
        rollout={"lap": {"max_tokens": 7}},
    )
    setup = set_up(config, tmp_path / "run", None, World())
    from_config = PolicyUpdate.from_config(setup, config, World())
    loss = LossConfig(name="clip-higher", aggregation="constant", old_logprobs="recompute")
    update = PolicyUpdate(setup, World(), optim=config.optim, loss=loss, max_tokens=7)
    expected = LossSettings(**config.loss_options())
    assert update.settings == from_config.settings == expected
    assert update.settings.constant_normalizer == 7.0  # rollout.lap.max_tokens: the loss sets no normaliser
    assert update.recompute_old and from_config.recompute_old and not update.rollout_entropy
    assert update.optim.micro_batch_size == 3 and update.max_tokens == 7
    assert update.teacher is None and update.distill == DistillConfig()
    assert loss.options(max_tokens=7) == config.loss_options()

    with pytest.raises(ValueError, match=r"distill\.teacher .* no teacher was given"):
        PolicyUpdate(
            setup,
            World(),
            optim=config.optim,
            loss=loss,
            max_tokens=7,
            distill=DistillConfig(teacher=f"hf:{tiny_model}"),
        )


def test_teacher_load_refuses_an_unset_teacher():
    with pytest.raises(ValueError, match="distill.teacher is unset"):
        Teacher.load(DistillConfig(), dtype="float32", threads=1)
