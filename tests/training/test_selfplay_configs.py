"""The shipped self-play configs run from the CLI, and their models are measured with the prompt they learned."""

import json
from pathlib import Path

import pytest

import games  # noqa: F401  (registers the catalog)
from games.kuhn_poker_exploitability import kuhn_exploitability
from tsmg.apps.cli import main
from tsmg.lap import LAP, LAPConfig

REPO = Path(__file__).resolve().parents[2]
#: The prompt of the shipped configs: the observation alone, moves constrained to the legal ones.
TRAINED_LAP = {"template": {"system": None, "user": "{observation}"}, "action_format": {"kind": "choice"}}


def train_briefly(config: str, out: Path) -> Path:
    """Two small updates of a shipped config, as a user runs it."""
    flags = ["--updates", "2", "--groups", "2", "--group-size", "4", "--seed", "1", "--out", str(out), "--quiet"]
    assert main(["train", "--config", str(REPO / "configs" / config), *flags]) == 0
    return out


@pytest.fixture(scope="module")
def kuhn_run(tmp_path_factory):
    return train_briefly("kuhn_selfplay_tiny.yaml", tmp_path_factory.mktemp("kuhn") / "run")


def test_tsmg_exploitability_measures_a_trained_model_on_the_view_and_prompt_it_learned(kuhn_run, capsys):
    from backends.hf import HFBackend

    model = f"hf:{kuhn_run}/final"
    assert main(["exploitability", "--game", "KuhnPoker-v0", "--model", model, "--json"]) == 0
    [trained] = json.loads(capsys.readouterr().out)
    backend = HFBackend(str(kuhn_run / "final"), threads=1)
    expected = kuhn_exploitability(
        LAP(backend, LAPConfig.model_validate(TRAINED_LAP)), game_options={"view": "compact"}
    )
    assert trained["strategy"].keys() == expected.strategy.keys()
    for infoset, moves in expected.strategy.items():
        assert trained["strategy"][infoset] == pytest.approx(moves, abs=1e-9)
    assert trained["exploitability"] == pytest.approx(expected.exploitability, abs=1e-9)
    untrained_prompt = kuhn_exploitability(
        LAP(backend, LAPConfig.model_validate({"action_format": {"kind": "choice"}}))
    )
    assert untrained_prompt.exploitability != pytest.approx(expected.exploitability, abs=1e-6)
    # an option given on the command line wins over the run's
    assert main(["exploitability", "--model", model, "--option", "view=full", "--json"]) == 0
    [full] = json.loads(capsys.readouterr().out)
    full_view = kuhn_exploitability(LAP(backend, LAPConfig.model_validate(TRAINED_LAP)), game_options={"view": "full"})
    assert full["exploitability"] == pytest.approx(full_view.exploitability, abs=1e-9)
    # the model the run started from is its "before", measured the same way
    assert main(["exploitability", "--model", f"hf:{kuhn_run}/base_model", "--json"]) == 0
    [before] = json.loads(capsys.readouterr().out)
    base = HFBackend(str(kuhn_run / "base_model"), threads=1)
    expected_before = kuhn_exploitability(
        LAP(base, LAPConfig.model_validate(TRAINED_LAP)), game_options={"view": "compact"}
    )
    assert before["exploitability"] == pytest.approx(expected_before.exploitability, abs=1e-9)


def test_tsmg_eval_plays_a_trained_model_on_the_game_options_it_learned(kuhn_run, tmp_path):
    from tsmg.apps.cli import _build_parser
    from tsmg.apps.evaluation.cli import config_from_args

    model = f"hf:{kuhn_run}/final"
    parser = _build_parser()
    config = config_from_args(
        parser.parse_args(["eval", "--game", "KuhnPoker-v0", "--model", model, "--model", "random"])
    )
    assert config.game_options == {"KuhnPoker-v0": {"view": "compact"}}
    given = ["eval", "--game", "KuhnPoker-v0", "--game", "TicTacToe-v0", "--model", model, "-o", "view=full"]
    config = config_from_args(parser.parse_args(given))
    assert config.game_options == {"KuhnPoker-v0": {"view": "full"}, "TicTacToe-v0": {"view": "full"}}
    other = tmp_path / "other"  # a run of the same game with another view: the evaluation must be told which
    (other / "final").mkdir(parents=True)
    document = (kuhn_run / "config.yaml").read_text().replace("view: compact", "view: full")
    (other / "config.yaml").write_text(document)
    with pytest.raises(ValueError, match="different game options"):
        config_from_args(
            parser.parse_args(["eval", "--game", "KuhnPoker-v0", "--model", model, "--model", f"hf:{other}/final"])
        )


def test_the_tictactoe_configs_train_from_the_cli(tmp_path):
    for config in ("tictactoe_selfplay_tiny.yaml", "tictactoe_vs_noisy_minimax_tiny.yaml"):
        run = train_briefly(config, tmp_path / config)
        assert (run / "final").is_dir()
        assert json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["rollout/invalid_rate"] == 0.0


def test_tsmg_exploitability_averages_the_policies_of_several_models(kuhn_run, capsys):
    from games import kuhn_poker_rules as rules
    from games.kuhn_poker_exploitability import kuhn_strategy
    from tsmg.apps.evaluation.runner import trained_policy

    models = [f"hf:{kuhn_run}/base_model", f"hf:{kuhn_run}/final"]
    assert main(["exploitability", "--model", *models, "--average", "--temperature", "1", "--json"]) == 0
    *each, average = json.loads(capsys.readouterr().out)
    assert [row["model"] for row in each] == models and average["model"] == "average of 2"
    lap = LAPConfig.model_validate({"action_format": {"kind": "choice"}, "temperature": 1.0})
    strategies = [kuhn_strategy(trained_policy(model, lap), game_options={"view": "compact"}) for model in models]
    expected = rules.average_strategy(strategies)
    assert average["exploitability"] == pytest.approx(rules.exploitability(expected), abs=1e-9)
    assert average["strategy"]["J:kb"]["call"] == pytest.approx(expected[(rules.JACK, "kb")][0], abs=1e-9)
    assert main(["exploitability", "--game", "openspiel:kuhn_poker", "--model", "random", "--average"]) == 2
    assert "openspiel:kuhn_poker cannot measure an average policy" in capsys.readouterr().err
