"""Asynchronous training: eta = 0 is the synchronous run, the staleness bound, off-policy masking, kill and resume."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from tests.small_lake import comparable, killed_after_a_checkpoint, make_config
from training.checkpoint import latest_checkpoint
from training.config import TrainConfig
from training.distributed import World
from training.rollout.async_loop import AsyncRollouts
from training.rollout.engines import HFRolloutEngine
from training.rollout.sources import GroupRollouts
from training.setup import set_up
from training.trainer import TrainHooks, train
from training.update import PolicyUpdate, UpdateData, plan_optimizer_steps
from tsmg.apps.cli import main
from tsmg.episode import read_episodes

ASYNC = {"loop": {"mode": "async", "max_staleness": 1}}


def episodes_of(run_dir: Path) -> list[dict]:
    return [
        episode.model_dump(exclude={"latency_s": True, "steps": {"__all__": {"latency_s"}}})
        for episode in read_episodes(run_dir / "episodes.jsonl")
    ]


def without_timing(rows: list[dict]) -> list[dict]:
    return [{key: value for key, value in row.items() if key != "async/worker_play_s"} for row in comparable(rows)]


def test_eta_0_gives_exactly_the_synchronous_episodes_and_weights(tiny_model, tmp_path):
    run = {"updates": 4, "episodes_every": 1, "eval_every": 2, "eval_episodes": 8}
    synchronous = train(make_config(tmp_path / "sync", tiny_model, run=run))
    asynchronous = train(
        make_config(tmp_path / "async", tiny_model, run=run, loop={"mode": "async", "max_staleness": 0})
    )
    assert episodes_of(tmp_path / "async") == episodes_of(tmp_path / "sync")
    assert len(episodes_of(tmp_path / "sync")) == 4 * 16
    rows = [{key: value for key, value in row.items() if not key.startswith("async/")} for row in asynchronous.metrics]
    assert comparable(rows) == comparable(synchronous.metrics)
    assert all(row.get("async/staleness", 0.0) == 0.0 for row in asynchronous.metrics)
    weights, reference = (load_file(result.final_model / "model.safetensors") for result in (asynchronous, synchronous))
    assert weights.keys() == reference.keys()
    assert all(torch.equal(weights[name], reference[name]) for name in weights)


@pytest.mark.parametrize("eta", [1, 2])
def test_no_sample_is_older_than_eta_under_a_slow_trainer(tiny_model, tmp_path, monkeypatch, eta):
    early = []  # per update: whether the worker had finished its rollout before the trainer asked for it
    take = AsyncRollouts.play

    def watched(self, step, version=None):
        asked = time.time()
        batch = take(self, step, version)
        early.append(self.finished_at[step] < asked)
        return batch

    monkeypatch.setattr(AsyncRollouts, "play", watched)

    def slow(step, loss):  # the trainer takes far longer than the worker's rollout
        time.sleep(0.3)
        return loss

    config = make_config(
        tmp_path / "run",
        tiny_model,
        run={"updates": 6, "episodes_every": 1},
        loop={"mode": "async", "max_staleness": eta},
    )
    result = train(config, hooks=TrainHooks(transform_loss=slow))
    for episode in read_episodes(tmp_path / "run" / "episodes.jsonl"):
        update = int(episode.episode_id.split("/")[0][1:])
        assert episode.policy_version == max(update - 1 - eta, 0)  # exactly the bound: never older, never fresher
        assert {step.policy_version for step in episode.steps} == {episode.policy_version}
    assert max(row["async/staleness"] for row in result.metrics if row["step"]) == eta
    assert any(early)  # the worker played ahead while the trainer was busy


def test_stale_tokens_outside_the_trust_range_are_masked_not_clipped(tiny_model, tmp_path):
    config = make_config(tmp_path / "run", tiny_model, **ASYNC)
    setup = set_up(config, tmp_path, None, World())
    update = PolicyUpdate.from_config(setup, config, World())
    engine = HFRolloutEngine(setup.backend, config.rollout, ["player"])
    source = AsyncRollouts(
        config, engine, World(), setup=setup, update=update, run_dir=tmp_path, model_seats=["player"], start_step=2
    )
    # played by version 1; the trainer is at 2
    batch = GroupRollouts(config.rollout, config.run, engine, World()).play(3, version=1)
    episodes = {episode.episode_id: episode for episode in batch.episodes}
    record = batch.episodes[0].steps[0]
    record.logprobs = [record.logprobs[0] + 1.0]  # the engine put e times more mass on it: far off-policy
    fresh = batch.episodes[1]
    fresh.steps[0].policy_version = 2  # this one is on-policy: kept as recorded
    from training.credit import StepCredit

    steps = [
        StepCredit(0, batch.episodes[0].episode_id, "player", 0, 1.0),
        StepCredit(1, fresh.episode_id, "player", 0, 1.0),
    ]
    samples, metrics = source.training_samples(steps, episodes, batch, step=3)
    recomputed = update.old_logprobs([samples[0]], batch.temperature)[0]
    assert samples[0].behaviour_logprobs == pytest.approx(recomputed)  # pi_old: the trainer's weights now
    assert samples[0].token_mask == [False]  # masked: it adds nothing to the loss, not even a clipped term
    assert samples[1].token_mask is None and samples[1].behaviour_logprobs == fresh.steps[0].logprobs
    assert metrics["async/stale_samples"] == 1 and metrics["async/masked_token_fraction"] == 1.0
    # An unperturbed stale token: the same weights sampled it, so its ratio is 1 and it is kept.
    record.logprobs = list(recomputed)
    samples, _ = source.training_samples(steps[:1], episodes, batch, step=3)
    assert samples[0].token_mask == [True]


def test_at_temperature_0_7_pi_prox_is_recomputed_at_the_rollout_temperature(tiny_model, tmp_path):
    """pi_prox of a stale sample is log softmax(logits / T) at the rollout's T, not at T = 1.

    Kills the mutation that recomputes pi_prox at temperature 1 (``training/rollout/async_loop.py``,
    :meth:`AsyncRollouts.training_samples`: ``self.update.old_logprobs(unrecorded, 1.0)``, or
    ``temperature = 1.0``): the other async tests sample at T = 1, where both agree. The version that
    played the samples has the trainer's weights here, so pi_prox must equal the sampler's own
    log-probabilities token for token: every token kept, every weight 1, and the first ratio 1.
    """
    from training.credit import StepCredit

    lap = {**make_config(tmp_path, tiny_model).rollout.lap.model_dump(), "temperature": 0.7}
    config = make_config(tmp_path / "run", tiny_model, rollout={"lap": lap}, **ASYNC)
    assert config.rollout.lap.temperature == 0.7
    setup = set_up(config, tmp_path, None, World())
    update = PolicyUpdate.from_config(setup, config, World())
    engine = HFRolloutEngine(setup.backend, config.rollout, ["player"])
    source = AsyncRollouts(
        config, engine, World(), setup=setup, update=update, run_dir=tmp_path, model_seats=["player"], start_step=2
    )
    batch = GroupRollouts(config.rollout, config.run, engine, World()).play(3, version=1)  # the trainer is at 2
    assert batch.temperature == 0.7 and batch.exact_logprobs
    episodes = {episode.episode_id: episode for episode in batch.episodes}
    steps = [
        StepCredit(k, episode.episode_id, "player", 0, 1.0 - 2 * (k % 2)) for k, episode in enumerate(batch.episodes)
    ]
    samples, metrics = source.training_samples(steps, episodes, batch, step=3)
    assert metrics["async/stale_samples"] == len(samples) == len(batch.episodes)
    # By hand: the tokens' log softmax(logits / 0.7) under the trainer's weights, as the sampler drew them.
    with torch.no_grad():
        rows = update.score(setup.backend.model, samples, 0.7, entropy=False).rows()
    for sample, episode, row in zip(samples, batch.episodes, rows, strict=True):
        recorded = episode.steps[0].logprobs
        assert sample.behaviour_logprobs == pytest.approx(recorded, abs=1e-5), "pi_prox is not at the rollout's T"
        assert sample.behaviour_logprobs == pytest.approx(row.tolist(), abs=1e-5)
        assert all(sample.token_mask) and sample.token_weights == pytest.approx([1.0] * len(recorded), abs=1e-4)
    assert metrics["async/masked_token_fraction"] == 0.0
    assert metrics["async/importance_weight_mean"] == pytest.approx(1.0, abs=1e-4)
    # The update's first optimizer step: pi_theta / pi_prox is 1 on every token.
    losses = update(3, samples, temperature=batch.temperature, rng=np.random.default_rng(0))
    assert losses["optim/steps"] == 1 and losses["loss/ratio_mean"] == pytest.approx(1.0, abs=1e-5)


def test_a_stale_samples_kept_tokens_are_weighted_by_pi_prox_over_pi_behaviour(tiny_model, tmp_path):
    # Decoupled PPO: loss = -w min(r A, clip(r) A), r = pi_theta / pi_prox, w = pi_prox / pi_behaviour
    # (no gradient). At the update's first optimizer step pi_theta = pi_prox, so the gradient of a
    # token-mean loss is -(1/N) sum_t w_t A_t grad log pi_theta(y_t): compare with that, by hand.
    from training.credit import StepCredit

    config = make_config(tmp_path / "run", tiny_model, **ASYNC)
    setup = set_up(config, tmp_path, None, World())
    update = PolicyUpdate.from_config(setup, config, World())
    engine = HFRolloutEngine(setup.backend, config.rollout, ["player"])
    source = AsyncRollouts(
        config, engine, World(), setup=setup, update=update, run_dir=tmp_path, model_seats=["player"], start_step=2
    )
    # played by version 1; the trainer is at 2
    batch = GroupRollouts(config.rollout, config.run, engine, World()).play(3, version=1)
    episodes = {episode.episode_id: episode for episode in batch.episodes}
    shifts = [0.4, -0.6, 0.0]  # engine log-prob offsets: w = e^-0.4 and e^0.6 (both inside [0.5, 2]), and a fresh one
    for episode, shift in zip(batch.episodes, shifts, strict=False):
        episode.steps[0].logprobs = [value + shift for value in episode.steps[0].logprobs]
    batch.episodes[2].steps[0].policy_version = 2  # on-policy: recorded log-probabilities, weight 1
    advantages = [1.0, -1.0, 0.5]
    steps = [
        StepCredit(k, batch.episodes[k].episode_id, "player", 0, advantage) for k, advantage in enumerate(advantages)
    ]
    samples, metrics = source.training_samples(steps, episodes, batch, step=3)
    assert metrics["async/masked_token_fraction"] == 0.0 and metrics["async/stale_samples"] == 2
    n0, n1 = len(samples[0].behaviour_logprobs), len(samples[1].behaviour_logprobs)  # the stale samples' tokens
    mean_weight = (n0 * math.exp(-0.4) + n1 * math.exp(0.6)) / (n0 + n1)
    assert metrics["async/importance_weight_mean"] == pytest.approx(mean_weight, rel=1e-4)

    data = UpdateData(samples, (), update.old_logprobs(samples, batch.temperature), None, batch.temperature)
    [planned] = plan_optimizer_steps(len(samples), 0, config.optim, np.random.default_rng(0))
    model = setup.backend.model
    model.zero_grad(set_to_none=True)
    _, finite = update.backward_step(3, planned, data)
    assert finite
    trained = {name: parameter.grad.clone() for name, parameter in model.named_parameters()}

    model.zero_grad(set_to_none=True)
    scores = update.score(model, samples, batch.temperature, entropy=False)
    rows = scores.rows()
    tokens = sum(len(row) for row in rows)
    assert torch.allclose(rows[0], torch.tensor(samples[0].behaviour_logprobs))  # pi_theta = pi_prox: r = 1
    by_hand = 0.0
    for row, shift, advantage in zip(rows, shifts, advantages, strict=True):
        by_hand = by_hand - math.exp(-shift) * advantage * row.sum() / tokens  # w = pi_prox / (pi_prox e^shift)
    by_hand.backward()
    assert any(grad.abs().sum() > 0 for grad in trained.values())
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(trained[name], parameter.grad, rtol=1e-4, atol=1e-7, msg=name)


def test_killing_an_async_run_and_resuming_it_loses_and_repeats_nothing(tiny_model, tmp_path):
    out = tmp_path / "killed"
    config = make_config(
        out, tiny_model, run={"updates": 1000, "checkpoint_every": 2, "keep_last": 2, "episodes_every": 1}, **ASYNC
    )
    saved = killed_after_a_checkpoint(config, tmp_path)
    assert (latest_checkpoint(out / "checkpoints") / "async_rollouts.jsonl").read_text().count("\n") == 1
    updates = saved + 3
    resumed = train(config.model_copy(update={"run": config.run.model_copy(update={"updates": updates})}), resume=True)
    reference = train(
        make_config(tmp_path / "reference", tiny_model, run={"updates": updates, "episodes_every": 1}, **ASYNC)
    )
    assert without_timing(resumed.metrics) == without_timing(reference.metrics)
    played = [episode["episode_id"] for episode in episodes_of(out)]
    assert len(played) == len(set(played)) == updates * 16  # every update's episodes once: none lost, none twice
    # The same episodes (the policy's name aside: a resumed run loads the checkpoint's folder).
    assert [{**e, "policies": None} for e in episodes_of(out)] == [
        {**e, "policies": None} for e in episodes_of(tmp_path / "reference")
    ]


def test_a_run_stopped_early_closes_its_worker_without_waiting(tiny_model, tmp_path, monkeypatch, caplog):
    """The worker's rollouts played ahead fill its results pipe; closing reads them so that it can exit."""
    monkeypatch.setattr("training.rollout.async_loop._STOP_TIMEOUT_S", 20.0)
    config = make_config(
        tmp_path / "run",
        tiny_model,
        rollout={"group_size": 8, "groups_per_update": 16},  # rollouts larger than a pipe's buffer
        run={"updates": 6},
        loop={"mode": "async", "max_staleness": 2},
    )
    with caplog.at_level("WARNING", logger="training.rollout.async_loop"):
        result = train(config, hooks=TrainHooks(should_stop=lambda step, metrics: step >= 1))
    assert result.steps == 1
    assert not [record for record in caplog.records if "did not stop" in record.getMessage()]


def test_async_configurations_that_cannot_work_are_refused():
    base = {"rollout": {"game_id": "FrozenLake-v0"}, "model": {"spec": "tiny"}}
    with pytest.raises(ValueError, match=r"max_staleness \(eta\) is -1.*must be 0 or more"):
        TrainConfig.model_validate({**base, "loop": {"mode": "async", "max_staleness": -1}})
    with pytest.raises(ValueError, match="'openai:gpt-4o' plays on an engine that cannot take new weights"):
        TrainConfig.model_validate({**base, "model": {"spec": "openai:gpt-4o"}, "loop": {"mode": "async"}})
    with pytest.raises(ValueError, match="rtpo updates each turn against a continuation"):
        TrainConfig.model_validate(
            {**base, "rollout": {"game_id": "FrozenLake-v0", "shape": "rtpo"}, "loop": {"mode": "async"}}
        )
    with pytest.raises(ValueError, match=r"\['max_staleness'\] only apply to loop.mode 'async'"):
        TrainConfig.model_validate({**base, "loop": {"max_staleness": 3}})


def test_the_cli_refuses_a_negative_eta_in_one_sentence(tmp_path, capsys):
    # In process (the CLI's main and its error report, without a second interpreter importing torch).
    command = ["train", "--game", "FrozenLake-v0", "--model", "tiny"]
    command += ["--set", "loop.mode=async", "--set", "loop.max_staleness=-1", "--out", str(tmp_path / "run")]
    returncode, stderr = main(command), capsys.readouterr().err
    assert returncode != 0 and "Traceback" not in stderr
    assert "max_staleness (eta) is -1" in stderr and not (tmp_path / "run").exists()
