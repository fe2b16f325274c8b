"""The HF rollout engine: a share of a rollout samples as it does within the whole rollout."""

from backends.hf import HFBackend
from backends.tiny import build_tiny_model
from tests.small_lake import make_config
from training.rollout.engines import HFRolloutEngine
from tsmg.rollout import plan_episodes


def moves(batch):
    return [[(step.round, step.completion, step.token_ids) for step in episode.steps] for episode in batch.episodes]


def test_a_share_of_a_rollout_samples_as_it_does_in_the_whole_rollout(tmp_path):
    # What a data-parallel rank does: play a contiguous share of the plans. Sampling seeds follow
    # the plan position (game seed, index in the group), not the position in the rollout.
    model = build_tiny_model(tmp_path / "model")
    config = make_config(tmp_path / "run", model)  # constrained choice at temperature 1
    engine = HFRolloutEngine(HFBackend(model, threads=1), config.rollout, ["player"])
    plans = plan_episodes("FrozenLake-v0", [11, 12], group_size=4, id_prefix="u1")
    whole = engine.play(plans, seed=7)
    first, second = engine.play(plans[:4], seed=7), engine.play(plans[4:], seed=7)
    assert moves(whole) == moves(first) + moves(second)
    # The members of a group sample differently; another run seed samples differently again.
    assert len({str(episode) for episode in moves(whole)[:4]}) > 1
    assert moves(engine.play(plans[4:], seed=8)) != moves(second)
    # Every model step is a training record: prompt ids, the offered choices, tokens, logprobs.
    steps = [step for episode in whole.episodes for step in episode.steps]
    assert steps and all(step.prompt_token_ids and step.token_ids and step.logprobs for step in steps)
    assert all(step.choices == ["left", "down", "right", "up"] for step in steps)


def test_the_engine_records_the_temperature_each_step_was_sampled_at(tmp_path):
    """Schema 4: the record says how the rollout was sampled (the batch carries nothing beside it)."""
    model = build_tiny_model(tmp_path / "model")
    config = make_config(tmp_path / "run", model)
    engine = HFRolloutEngine(HFBackend(model, threads=1), config.rollout, ["player"])
    plans = plan_episodes("FrozenLake-v0", [11], group_size=2, id_prefix="u1")
    batch = engine.play(plans, seed=7, temperature=0.5)
    steps = [step for episode in batch.episodes for step in episode.steps]
    assert steps and {(step.temperature, step.exact_logprobs) for step in steps} == {(0.5, True)}
    assert all(episode.model_seats == ["player"] for episode in batch.episodes)
    assert batch.temperature == 0.5 and batch.exact_logprobs
