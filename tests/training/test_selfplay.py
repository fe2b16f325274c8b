"""Self-play training on a tiny model: seats, the opponent pool, the role baseline across a resume, refusals."""

import json
import shutil

import pytest
from pydantic import ValidationError

from tests.small_lake import CHOICE_LAP
from training.config import IncompatibleGameError, TrainConfig
from training.rollout.selfplay import OpponentPoolError
from training.trainer import base_model_source, train
from tsmg.episode import read_episodes


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    config = TrainConfig(rollout={"game_id": "TicTacToe-v0"}, model={"spec": "tiny"})
    return base_model_source(config.model, folder, seed=config.run.seed)


def make_config(out_dir, model_dir, *, game="TicTacToe-v0", **sections):
    data = {
        "rollout": {"game_id": game, "group_size": 2, "groups_per_update": 4, "lap": CHOICE_LAP},
        "model": {"spec": f"hf:{model_dir}", "finetune": "full"},
        "optim": {"lr": 1e-3, "micro_batch_size": 32, "grad_accumulation": 1},
        "run": {"out_dir": str(out_dir), "updates": 2, "threads": 1, "tensorboard": False, "episodes_every": 1},
    }
    for section, values in sections.items():
        data.setdefault(section, {}).update(values)
    return TrainConfig.model_validate(data)


def comparable(rows):
    return [{key: value for key, value in row.items() if not key.startswith("time/")} for row in rows]


def test_rae_self_play_keeps_its_role_baselines_exactly_across_a_resume(tiny_model, tmp_path):
    sections = {"rollout": {"self_play": True}, "credit": {"name": "rae", "params": {"alpha": 0.5}}}
    reference = train(make_config(tmp_path / "reference", tiny_model, run={"updates": 4}, **sections))
    baselines = [row["credit/rae/TicTacToe-v0/player_0"] for row in reference.metrics]
    assert len(set(baselines)) == 4  # the first seat's baseline moves every update
    assert all(
        row["credit/rae/TicTacToe-v0/player_1"] == pytest.approx(-row["credit/rae/TicTacToe-v0/player_0"])
        for row in reference.metrics
    )  # zero-sum, same episodes: the seats' baselines mirror each other

    out = tmp_path / "resumed"
    first = make_config(out, tiny_model, run={"updates": 2, "checkpoint_every": 2}, **sections)
    train(first)
    saved = json.loads((out / "checkpoints" / "step-2" / "state.json").read_text())
    assert saved["state"]["credit_state"]["rae"]["TicTacToe-v0/player_0"] == baselines[1]
    longer = first.model_copy(update={"run": first.run.model_copy(update={"updates": 4})})
    resumed = train(longer, resume=True)
    assert resumed.resumed_from == 2
    assert comparable(resumed.metrics) == comparable(reference.metrics)


def test_rotating_seats_against_a_fixed_opponent_trains_only_the_models_seats(tiny_model, tmp_path):
    config = make_config(tmp_path / "run", tiny_model, rollout={"opponent": "random", "seating": "rotate"})
    result = train(config)
    episodes = list(read_episodes(tmp_path / "run" / "episodes.jsonl"))
    model_seats = {}
    for episode in episodes:
        [seat] = [agent for agent, name in episode.policies.items() if name != "random"]
        model_seats.setdefault(episode.group_id, set()).add(seat)
    assert all(len(seats) == 1 for seats in model_seats.values())  # one seat per group
    assert {seat for seats in model_seats.values() for seat in seats} == {"player_0", "player_1"}
    row = result.metrics[-1]
    assert row["credit/trajectories"] == 8 and row["credit/groups"] == 4  # the model's seat of each episode
    # The model seat's figures: the untrained model against random, not the two seats averaged to 0.
    assert row["rollout/episodes"] == 8


def test_an_opponent_pool_draws_past_snapshots_and_resumes_exactly(tiny_model, tmp_path):
    sections = {
        "rollout": {"opponent_pool": {"snapshot_every": 1}, "seating": "rotate"},
        "credit": {"name": "rae"},
        "run": {"updates": 4},
    }
    reference = train(make_config(tmp_path / "reference", tiny_model, **sections))
    pool = sorted(path.name for path in (tmp_path / "reference" / "opponent_pool").iterdir())
    assert pool == ["step-0", "step-1", "step-2", "step-3", "step-4"]
    opponents = {
        name
        for episode in read_episodes(tmp_path / "reference" / "episodes.jsonl")
        for name in episode.policies.values()
        if name.startswith("pool:")
    }
    assert "pool:step-0" in opponents and len(opponents) >= 2

    out = tmp_path / "resumed"
    first = make_config(out, tiny_model, **{**sections, "run": {"updates": 2, "checkpoint_every": 2}})
    train(first)
    # A snapshot left by a run killed after its checkpoint: the resumed run must not draw it.
    shutil.copytree(out / "opponent_pool" / "step-1", out / "opponent_pool" / "step-3")
    resumed = train(first.model_copy(update={"run": first.run.model_copy(update={"updates": 4})}), resume=True)
    assert comparable(resumed.metrics) == comparable(reference.metrics)


def test_a_pool_of_another_runs_checkpoints(tiny_model, tmp_path):
    earlier = make_config(tmp_path / "earlier", tiny_model, run={"updates": 2, "checkpoint_every": 1})
    train(earlier)
    config = make_config(
        tmp_path / "run",
        tiny_model,
        rollout={"opponent_pool": {"checkpoints": [str(tmp_path / "earlier")]}, "seating": "rotate"},
        run={"updates": 1},
    )
    train(config)
    names = {
        name for episode in read_episodes(tmp_path / "run" / "episodes.jsonl") for name in episode.policies.values()
    }
    assert {f"pool:{tmp_path / 'earlier' / 'checkpoints' / 'step-2'}"} <= names


def test_bad_self_play_set_ups_are_refused_before_any_model_loads(tmp_path):
    def attempt(**sections):
        config = make_config(tmp_path / "run", "unused-model", game="FrozenLake-v0", **sections)
        with pytest.raises(IncompatibleGameError) as caught:
            train(config)
        assert not (tmp_path / "run").exists()
        return str(caught.value)

    assert "self-play needs a game of two or more seats, but FrozenLake-v0 has a single agent" in attempt(
        rollout={"self_play": True}
    )
    assert "'rae' assigns self-play credit per seat" in attempt(credit={"name": "rae"})
    assert "opponent pool" in attempt(rollout={"opponent_pool": {"snapshot_every": 5}})

    empty = tmp_path / "empty-run"
    (empty / "checkpoints").mkdir(parents=True)
    config = make_config(tmp_path / "run", "unused-model", rollout={"opponent_pool": {"checkpoints": [str(empty)]}})
    with pytest.raises(OpponentPoolError, match="holds no checkpoints yet"):
        train(config)
    assert not (tmp_path / "run").exists()

    with pytest.raises(ValidationError, match="the opponent pool has no checkpoints yet"):
        make_config(tmp_path / "run", "m", rollout={"opponent_pool": {}})
    with pytest.raises(ValidationError, match="choose one of self_play / opponent"):
        make_config(tmp_path / "run", "m", rollout={"self_play": True, "opponent": "random"})
    with pytest.raises(ValidationError, match="rotate"):
        make_config(tmp_path / "run", "m", rollout={"seating": "rotate"})
    seated = {"opponent": "random", "seating": "rotate"}
    with pytest.raises(ValidationError, match="seats every group on its own, which tree rollouts do not do yet"):
        make_config(tmp_path / "run", "m", rollout={**seated, "shape": "tree"}, credit={"name": "tree-grpo"})
    with pytest.raises(ValidationError, match="which asynchronous training does not do yet"):
        make_config(tmp_path / "run", "m", rollout=seated, loop={"mode": "async"})
    with pytest.raises(ValidationError, match="which rtpo does not do yet"):
        make_config(tmp_path / "run", "m", rollout={"opponent_pool": {"snapshot_every": 2}, "shape": "rtpo"})


def test_the_cli_refuses_self_play_of_a_single_agent_game_in_one_sentence(tmp_path, capsys):
    # In process (the CLI's main and its error report, without a second interpreter importing torch).
    from tsmg.apps.cli import main

    command = ["train", "--game", "FrozenLake-v0", "--model", "tiny"]
    command += ["--set", "rollout.self_play=true", "--out", str(tmp_path / "run")]  # (--self-play: deprecated)
    assert main(command) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: self-play needs a game of two or more seats, but FrozenLake-v0 has a single agent (player)"
    ]


def test_checkpoints_play_as_models_in_tsmg_eval_with_openskill_ratings(tiny_model, tmp_path, capsys):
    import torch

    from tsmg.apps.cli import main

    run = tmp_path / "run"
    view = r"( [XO1-9] \| [XO1-9] \| [XO1-9])|(It is your turn .*)"  # trained on a compact prompt
    train(
        make_config(
            run, tiny_model, rollout={"self_play": True, "observation_lines": view}, run={"checkpoint_every": 1}
        )
    )
    models = [f"hf:{run}/checkpoints/step-1", f"hf:{run}/checkpoints/step-2"]
    command = ["eval", "--game", "TicTacToe-v0", "--episodes", "3"]
    command += ["--action-format", "choice", "--no-progress", "--out", str(tmp_path / "eval")]
    for model in models:
        command += ["--model", model, "--model-option", f"{model}:threads=1"]
    # In process: a second interpreter importing torch cost more than the evaluation. threads=1 is
    # process-wide, so the other tests get torch's setting back.
    threads = torch.get_num_threads()
    try:
        returncode = main(command)
    finally:
        torch.set_num_threads(threads)
    assert returncode == 0, capsys.readouterr().err
    [game] = json.loads((tmp_path / "eval" / "summary.json").read_text())["games"]
    assert set(game["ratings"]) == set(models)
    assert sum(game["head_to_head"][models[0]][models[1]].values()) == 6  # 3 seeds, seats swapped
    # Each checkpoint plays with the prompt it trained with (no system message, the compact view), not the
    # evaluation's default prompt.
    trained = next(read_episodes(run / "episodes.jsonl")).steps[0].prompt
    evaluated = next(read_episodes(tmp_path / "eval" / "episodes.jsonl")).steps[0].prompt
    assert evaluated == trained and [message.role for message in trained] == ["user"]
    assert trained[0].content.startswith(" 1 | 2 | 3\n")


def test_a_lora_checkpoint_loads_over_its_runs_base_model(tiny_model, tmp_path):
    import torch

    from backends import load_model

    run = tmp_path / "lora"
    config = make_config(run, tiny_model, rollout={"self_play": True}, model={"finetune": "lora", "lora_r": 2})
    train(config.model_copy(update={"run": config.run.model_copy(update={"updates": 1})}))
    checkpoint = load_model(f"hf:{run}/checkpoints/step-1", threads=1)
    merged = load_model(f"hf:{run}/final", threads=1)  # the same adapter, merged into the weights
    assert checkpoint.name == f"hf:{run}/checkpoints/step-1"
    ids = torch.tensor([checkpoint.tokenizer("Tic-tac-toe on a 3x3 board.")["input_ids"]])
    base = load_model(f"hf:{tiny_model}", threads=1)
    with torch.no_grad():
        torch.testing.assert_close(checkpoint.model(ids).logits, merged.model(ids).logits, atol=1e-4, rtol=1e-4)
        assert not torch.allclose(checkpoint.model(ids).logits, base.model(ids).logits)  # the adapter is on
    with pytest.raises(Exception, match="holds no model"):
        load_model(f"hf:{run}/checkpoints", threads=1)
