"""The switches a recipe needs (issue 40): every decision of a rollout trainable, pi_old from the first pass.

Mutations these tests were seen to fail (each on its own, 2026-12-05): the trainer passing no count
for ``samples_per_update: all`` (a draw of as many as there are decisions, with repeats, instead of
each once); ``every_item`` leaving out the steps whose advantage is 0; one epoch fewer than
``optim.epochs``; an epoch's last optimizer step dropped.
"""

import numpy as np
import pytest
import torch
from pydantic import ValidationError
from test_update import first_letter_game, free_text_config, model_dir, samples  # noqa: F401  (fixtures)

from training.distributed import World
from training.sampling import draw_steps
from training.setup import set_up
from training.update import PolicyUpdate, UpdateData, plan_optimizer_steps


def credit_of_four_episodes():
    from training.credit import assign_credit
    from tsmg.episode import Episode, StepRecord

    def episode(name, reward, steps):
        records = [StepRecord(index=i, round=i, agent="p", observation="", reward=0.0, state_key=f"s{i}")
                   for i in range(steps)]  # fmt: skip
        records[-1] = StepRecord(index=steps - 1, round=steps - 1, agent="p", observation="", reward=reward,
                                 state_key="end")  # fmt: skip
        return Episode(episode_id=name, game_id="g", group_id="g", agents=["p"], policies={"p": "m"},
                       steps=records, returns={"p": reward})  # fmt: skip

    return assign_credit("ms-grpo", [episode("a", 1.0, 3), episode("b", 0.0, 2), episode("c", 0.0, 4),
                                     episode("d", 1.0, 1)])  # fmt: skip


@pytest.mark.parametrize("unit", ["episode", "step"])
def test_samples_per_update_all_trains_every_decision_of_the_rollout_once(unit):
    credit = credit_of_four_episodes()
    steps, drawn = draw_steps(credit, "aaw", np.random.default_rng(0), unit=unit, count="all")
    every = credit.steps()
    assert len(steps) == len(every) == 10  # 3 + 2 + 4 + 1 decisions: none left out, none twice
    assert [(s.episode_id, s.step_index, s.advantage) for s in steps] == [
        (s.episode_id, s.step_index, s.advantage) for s in every
    ]
    assert drawn.stats.drawn == drawn.stats.distinct == drawn.stats.items
    capped, _ = draw_steps(credit, "aaw", np.random.default_rng(0), unit=unit, count=4)
    assert len({(s.episode_id, s.step_index) for s in capped}) < 10  # a draw of 4 leaves decisions out


@pytest.mark.parametrize("unit", ["episode", "step"])
def test_samples_per_update_all_keeps_the_decisions_whose_advantage_is_zero(unit):
    from training.credit import assign_credit
    from tsmg.episode import Episode, StepRecord

    def episode(name, group, reward, steps):
        records = [StepRecord(index=i, round=i, agent="p", observation="", reward=reward if i == steps - 1 else 0.0,
                              state_key=f"s{i}") for i in range(steps)]  # fmt: skip
        return Episode(episode_id=name, game_id="g", group_id=group, agents=["p"], policies={"p": "m"},
                       steps=records, returns={"p": reward})  # fmt: skip

    # Group "h" returned 0 twice: no signal, every one of its 5 decisions has A = 0.
    credit = assign_credit("ms-grpo", [episode("a", "g", 1.0, 2), episode("b", "g", 0.0, 3),
                                       episode("c", "h", 0.0, 2), episode("d", "h", 0.0, 3)])  # fmt: skip
    assert sum(s.advantage == 0.0 for s in credit.steps()) == 5
    steps, drawn = draw_steps(credit, "aaw", np.random.default_rng(0), unit=unit, count="all")
    assert [(s.episode_id, s.step_index) for s in steps] == [(s.episode_id, s.step_index) for s in credit.steps()]
    assert sum(s.advantage == 0.0 for s in steps) == 5 and drawn.stats.distinct == drawn.stats.items
    aaw, _ = draw_steps(credit, "aaw", np.random.default_rng(0), unit=unit)
    assert all(s.advantage != 0.0 for s in aaw)  # a draw by |A| never takes them: 'all' is not a draw


def test_samples_per_update_all_is_a_config_value_and_refuses_the_importance_correction(model_dir, tmp_path):  # noqa: F811
    config = free_text_config(tmp_path, model_dir, sampler={"samples_per_update": "all", "unit": "step"})
    assert config.sampler.samples_per_update == "all"
    with pytest.raises(ValidationError, match="importance_correction"):
        free_text_config(tmp_path, model_dir, sampler={"samples_per_update": "all", "importance_correction": True})
    with pytest.raises(ValidationError):
        free_text_config(tmp_path, model_dir, sampler={"samples_per_update": "every"})


def one_step(config, tmp_path, samples, plan_index=0):  # noqa: F811
    """Gradients and losses of the first optimizer step, pi_old as the config says, from the same weights."""
    torch.manual_seed(0)
    setup = set_up(config, tmp_path, None, World())
    update = PolicyUpdate.from_config(setup, config, World())
    plan = plan_optimizer_steps(len(samples), 0, config.optim, np.random.default_rng(0))
    data = UpdateData(samples, [], update.old_logprobs(samples, 1.0, plan), None, 1.0)
    empty_before = [index for index, row in enumerate(data.old) if not row]
    setup.optimizer.zero_grad(set_to_none=True)
    setup.backend.model.train()
    losses, finite = update.backward_step(1, plan[plan_index], data)
    assert finite
    grads = {name: p.grad.clone() for name, p in setup.backend.model.named_parameters() if p.grad is not None}
    return grads, losses, data, empty_before, plan


@pytest.mark.parametrize("loss", ["ppo-clip", "turn-clip"])
def test_pi_old_from_the_first_pass_gives_the_recomputed_loss_and_gradient_without_the_extra_forward(
    model_dir,  # noqa: F811
    samples,  # noqa: F811
    tmp_path,
    loss,
):
    found = {}
    for mode in ("recompute", "first-pass"):
        optim = {"micro_batch_size": 5, "grad_accumulation": None}
        config = free_text_config(tmp_path / mode, model_dir, loss={"name": loss, "old_logprobs": mode}, optim=optim)
        found[mode] = one_step(config, tmp_path / mode, samples)
    grads, losses, data, empty, _ = found["first-pass"]
    ref_grads, ref_losses, ref_data, ref_empty, _ = found["recompute"]
    assert ref_empty == [] and empty == list(range(12))  # nothing scored up front: the first step fills pi_old
    assert any(grad.abs().sum() > 0 for grad in ref_grads.values())
    for mine, theirs in zip(data.old, ref_data.old, strict=True):
        assert mine == pytest.approx(theirs, abs=1e-6)
    assert [m["loss/policy"] for m, _ in losses] == pytest.approx([m["loss/policy"] for m, _ in ref_losses], abs=1e-6)
    for name, grad in ref_grads.items():
        torch.testing.assert_close(grads[name], grad, rtol=1e-5, atol=1e-7, msg=name)
    assert all(m["loss/clip_fraction"] == 0.0 for m, _ in losses if "loss/clip_fraction" in m)  # ratio exactly 1


def test_pi_old_of_samples_first_seen_after_the_weights_moved_is_recomputed_up_front(model_dir, samples, tmp_path):  # noqa: F811
    optim = {"micro_batch_size": 6, "grad_accumulation": 1, "epochs": 2}  # two optimizer steps per epoch
    config = free_text_config(tmp_path, model_dir, loss={"old_logprobs": "first-pass"}, optim=optim)
    _, _, data, empty, plan = one_step(config, tmp_path, samples)
    first = sorted(int(i) for batch in plan[0].policy for i in batch)
    assert len(plan) == 4 and empty == first  # the second step's samples were scored before any step
    assert all(len(row) == len(sample.completion_ids) for row, sample in zip(data.old, samples, strict=True))


def test_first_pass_is_refused_where_the_first_forward_is_not_pi_old(model_dir, tmp_path):  # noqa: F811
    with pytest.raises(ValidationError, match="lora_dropout"):
        free_text_config(tmp_path, model_dir, loss={"old_logprobs": "first-pass"},
                         model={"finetune": "lora", "lora_dropout": 0.1})  # fmt: skip
    with pytest.raises(ValidationError, match="gspo"):
        free_text_config(tmp_path, model_dir, loss={"old_logprobs": "first-pass", "name": "gspo"})


def test_epochs_and_mini_batches_pass_over_every_decision_of_the_rollout_epochs_times():
    from training.config import OptimConfig

    optim = OptimConfig(micro_batch_size=16, grad_accumulation=4, epochs=3)
    plan = plan_optimizer_steps(450, 0, optim, np.random.default_rng(0))
    seen = np.concatenate([batch for step in plan for batch in step.policy])
    assert np.bincount(seen, minlength=450).tolist() == [3] * 450  # each decision once per epoch
    assert len(plan) == 3 * 8  # 29 micro-batches of 16 per epoch, 4 per optimizer step: 8 steps per epoch


def test_a_run_with_samples_per_update_all_trains_on_every_decision_it_played(model_dir, tmp_path):  # noqa: F811
    from tests.small_lake import make_config
    from training.trainer import train

    config = make_config(
        tmp_path / "run",
        model_dir,
        sampler={"samples_per_update": "all", "unit": "step"},
        loss={"old_logprobs": "first-pass"},
        optim={"epochs": 2, "grad_accumulation": 1, "micro_batch_size": 8},
        run={"updates": 1},
    )
    [row] = [row for row in train(config).metrics if "sampler/samples" in row]
    assert row["sampler/samples"] == row["sampler/items"] == row["sampler/drawn"] > 16  # every decision of 16 episodes
    assert row["sampler/distinct"] == row["sampler/items"]  # each once: not as many draws as decisions, with repeats
    assert row["optim/steps"] == 2 * -(-row["sampler/samples"] // 8)  # two epochs of one micro-batch per step
