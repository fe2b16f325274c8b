"""Rollouts from a merged copy of the LoRA model: pi_old exact in float32, the trained weights never merged."""

import pytest
import torch

from tests.small_lake import make_config
from training.distributed import World
from training.rollout.engines import HFRolloutEngine, build_engine
from training.setup import set_up
from training.update import PolicyUpdate, training_samples
from tsmg.rollout import plan_episodes


def lora_setup(tmp_path, model_dir, merged="on", dtype="float32"):
    config = make_config(
        tmp_path / "run",
        model_dir,
        model={"finetune": "lora", "dtype": dtype},
        rollout={"merged_adapter": merged, "lap": {"temperature": 1.0}},
    )
    setup = set_up(config, tmp_path / "run", None, World())
    return config, setup


def sections(config):
    """The sections build_engine takes, from the run's configuration."""
    return {"rollout": config.rollout, "model": config.model, "seed": config.run.seed}


def move_adapter(setup, seed):
    """An optimizer step's worth of change: every LoRA weight moved (B starts at 0, so the adapter then matters)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in setup.backend.model.named_parameters():
            if "lora_" in name:
                parameter.add_(0.3 * torch.randn(parameter.shape, generator=generator))


def played_samples(engine, config, seed):
    plans = plan_episodes(config.rollout.game_id, [seed, seed + 1], 4)
    batch = engine.play(plans, seed=seed)
    steps = [
        _credit(episode.episode_id, index)
        for episode in batch.episodes
        for index, step in enumerate(episode.steps)
        if step.token_ids
    ]
    return batch, training_samples(steps, {episode.episode_id: episode for episode in batch.episodes})


def _credit(episode_id, index):
    from training.credit import StepCredit

    return StepCredit(0, episode_id, "player", index, 1.0)


def first_micro_step_ratios(update, samples, temperature):
    """exp(log pi_theta - log pi_old) as the first micro-batch's loss computes it: train mode, with gradient."""
    update.backend.model.train()
    old = update.old_logprobs(samples, temperature)
    scores = update.score(update.backend.model, samples, temperature)
    new = [row.detach() for row in scores.rows()]
    return torch.cat([torch.exp(row - torch.tensor(given)) for row, given in zip(new, old, strict=True)])


def base_weights(setup):
    return {
        name: parameter.detach().clone()
        for name, parameter in setup.backend.model.named_parameters()
        if "lora_" not in name
    }


def test_float32_rollouts_from_the_merged_copy_give_ratio_one_at_the_first_micro_step(tiny_model, tmp_path):
    config, setup = lora_setup(tmp_path, tiny_model)
    move_adapter(setup, 1)
    before = base_weights(setup)
    engine = build_engine(setup.backend, tmp_path / "run", ["player"], None, **sections(config))
    assert isinstance(engine, HFRolloutEngine) and engine.merged is not None
    assert engine.backend.model is not setup.backend.model and engine.exact_logprobs
    update = PolicyUpdate.from_config(setup, config, World())
    for round_seed in (10, 20):
        batch, samples = played_samples(engine, config, round_seed)
        assert batch.exact_logprobs and len(samples) >= 8
        assert all(sample.behaviour_logprobs is not None for sample in samples)  # pi_old is the record
        ratios = first_micro_step_ratios(update, samples, batch.temperature)
        assert ratios.numel() >= 8
        assert (ratios - 1).abs().max() < 1e-4, ratios
        # The adapter matters: the base model (adapter off) gives other probabilities.
        with setup.backend.adapter_enabled(False):
            base = first_micro_step_ratios(update, samples, batch.temperature)
        assert (base - 1).abs().max() > 1e-2
        move_adapter(setup, round_seed)  # "an optimizer step", then the engine's sync after the update
        engine.sync()
    # The trained model's base weights were never merged into (bit for bit the same), nor its mode changed.
    after = base_weights(setup)
    assert all(torch.equal(before[name], after[name]) for name in before)
    assert setup.backend.has_adapter


def test_a_merged_copy_not_refreshed_would_sample_stale_weights(tiny_model, tmp_path):
    # What sync() is for: without it the recorded log-probabilities are no longer the trainer's.
    config, setup = lora_setup(tmp_path, tiny_model)
    move_adapter(setup, 1)
    engine = build_engine(setup.backend, tmp_path / "run", ["player"], None, **sections(config))
    update = PolicyUpdate.from_config(setup, config, World())
    move_adapter(setup, 2)
    batch, samples = played_samples(engine, config, 30)
    assert (first_micro_step_ratios(update, samples, batch.temperature) - 1).abs().max() > 1e-2
    engine.sync()
    assert engine.merged.refresh_s > 0
    batch, samples = played_samples(engine, config, 30)
    assert (first_micro_step_ratios(update, samples, batch.temperature) - 1).abs().max() < 1e-4


def test_outside_float32_the_merged_copy_leaves_pi_old_to_be_recomputed(tiny_model, tmp_path):
    config, setup = lora_setup(tmp_path, tiny_model, dtype="bfloat16")
    engine = build_engine(setup.backend, tmp_path / "run", ["player"], None, **sections(config))
    assert engine.merged is not None and not engine.exact_logprobs
    batch, samples = played_samples(engine, config, 40)
    assert not batch.exact_logprobs and samples
    assert all(sample.behaviour_logprobs is None for sample in samples)  # recomputed under the trained weights


@pytest.mark.parametrize(("dtype", "exact"), [("float32", True), ("bfloat16", False)])
def test_sampling_through_the_trained_model_is_pi_old_in_float32_only(tiny_model, tmp_path, dtype, exact):
    # bfloat16's cached decode and the training forward round differently: pi_old is recomputed there
    config, setup = lora_setup(tmp_path, tiny_model, merged="off", dtype=dtype)
    engine = build_engine(setup.backend, tmp_path / "run", ["player"], None, **sections(config))
    assert engine.merged is None and engine.exact_logprobs == exact
    batch, samples = played_samples(engine, config, 41)
    assert batch.exact_logprobs == exact and samples
    assert all((sample.behaviour_logprobs is not None) == exact for sample in samples)


@pytest.mark.parametrize(("merged", "dtype", "expected"), [("auto", "float32", True), ("auto", "bfloat16", False)])
def test_auto_merges_float32_lora_on_a_cpu_only(tiny_model, tmp_path, merged, dtype, expected):
    config, setup = lora_setup(tmp_path, tiny_model, merged=merged, dtype=dtype)
    engine = build_engine(setup.backend, tmp_path / "run", ["player"], None, **sections(config))
    assert (engine.merged is not None) == expected
    evaluation = build_engine(setup.backend, tmp_path / "run", ["player"], None, **sections(config), on_vllm=False)
    assert evaluation.merged is None  # asynchronous training's evaluation engine is never synced


def test_merged_adapter_on_is_refused_where_it_cannot_apply(tiny_model, tmp_path):
    with pytest.raises(ValueError, match="needs finetune 'lora'"):
        make_config(tmp_path, tiny_model, rollout={"merged_adapter": "on"})
