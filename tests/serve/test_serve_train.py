"""``tsmg train`` on a served game: the same updates as in-process, from the same seeds."""

import pytest

pytest.importorskip("torch")

from training.config import TrainConfig  # noqa: E402
from training.run_log import METRICS_FILE, read_metrics  # noqa: E402
from training.trainer import base_model_source, train  # noqa: E402

SMALL_LAKE = {"desc": ["SF", "FG"], "max_steps": 4}  # random play reaches the goal about half the time


def config(game_id, model_dir, out_dir):
    return TrainConfig.model_validate(
        {
            "rollout": {
                "game_id": game_id,
                "game_options": SMALL_LAKE,
                "group_size": 4,
                "groups_per_update": 4,
                "observation_lines": "[_OPG]+",
                "lap": {"template": {"system": None, "user": "{observation}"}, "action_format": {"kind": "choice"}},
            },
            "model": {"spec": f"hf:{model_dir}", "finetune": "full"},
            "optim": {"lr": 1e-3, "micro_batch_size": 16, "grad_accumulation": 1},
            "run": {"out_dir": str(out_dir), "updates": 2, "threads": 1, "tensorboard": False},
        }
    )


def test_training_on_a_served_game_matches_in_process_training(served, tmp_path):
    tiny = {"spec": "tiny", "tiny": {"tokenizer_corpus": "prose"}}
    model = base_model_source(TrainConfig(rollout={"game_id": "FrozenLake-v0"}, model=tiny), tmp_path / "model")
    train(config(served.url("FrozenLake-v0"), model, tmp_path / "remote"))
    train(config("FrozenLake-v0", model, tmp_path / "local"))

    def figures(folder):
        rows = read_metrics(folder / METRICS_FILE)
        return [{key: value for key, value in row.items() if not key.startswith("time/")} for row in rows]

    remote, local = figures(tmp_path / "remote"), figures(tmp_path / "local")
    assert len(remote) == 2 and remote == local
    assert served.sessions("FrozenLake-v0") == 0  # every episode's session was closed
