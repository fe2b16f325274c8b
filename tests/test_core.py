"""The Game contract as a user meets it, on Frozen Lake."""

import pytest

import tsmg
from games import frozen_lake_rules as rules
from tsmg import GameError, GameOptionsError, Invalid, UnknownGameError


def play(game, answers):
    results = []
    for answer in answers:
        results.append(game.step({"player": answer}))
        if game.done:
            break
    return results


def test_reaching_the_goal_terminates_with_reward_one():
    game = tsmg.make("FrozenLake-v0")
    game.reset(seed=0)
    results = play(game, ["down", "down", "right", "right", "down", "right"])
    assert [r.rewards["player"] for r in results] == [0, 0, 0, 0, 0, 1.0]
    assert results[-1].terminated == {"player": True} and results[-1].truncated == {"player": False}
    assert game.is_success("player") is True
    assert game.active_agents == ()


def test_hole_terminates_without_reward():
    game = tsmg.make("FrozenLake-v0")
    game.reset(seed=0)
    [result] = play(game, ["right", "down"])[-1:]
    assert result.terminated["player"] and result.rewards["player"] == 0
    assert game.is_success("player") is False


def test_step_limit_truncates_not_terminates():
    game = tsmg.make("FrozenLake-v0", max_steps=3)
    game.reset(seed=0)
    results = play(game, ["left"] * 5)
    assert len(results) == 3
    assert results[-1].truncated["player"] and not results[-1].terminated["player"]


def test_invalid_answer_penalize_uses_turn_and_keeps_state():
    game = tsmg.make("FrozenLake-v0", invalid_penalty=0.5)
    observations, _ = game.reset(seed=0)
    result = game.step({"player": "jump"})
    info = result.infos["player"]
    assert info["valid"] is False and "left, down, right, up" in info["reason"] and info["action"] is None
    assert result.rewards["player"] == -0.5
    assert result.observations == observations
    assert game.rounds == 1


def test_invalid_answer_default_action_plays_first_legal_move():
    game = tsmg.make("FrozenLake-v0", on_invalid="default_action", invalid_penalty=1.0)
    game.reset(seed=0)
    result = game.step({"player": "<action></action>"})
    assert result.infos["player"]["action"] == "left" and result.rewards["player"] == -1.0


def test_invalid_answer_terminate_ends_episode_as_failure():
    game = tsmg.make("FrozenLake-v0", on_invalid="terminate", invalid_penalty=1.0)
    game.reset(seed=0)
    result = game.step({"player": Invalid("no action tag")})
    assert result.terminated["player"] and result.infos["player"]["reason"] == "no action tag"
    assert game.is_success("player") is False


def test_parse_accepts_variants_and_rejects_the_rest():
    game = tsmg.make("FrozenLake-v0")
    assert game.parse("player", " Right. ") == rules.RIGHT
    assert game.parse("player", "UP") == rules.UP
    for text in ["", "go up", "upp", "x" * 10_000, "\x00"]:
        assert isinstance(game.parse("player", text), Invalid)


def test_stepping_errors_are_clear():
    game = tsmg.make("FrozenLake-v0")
    with pytest.raises(GameError, match="reset"):
        game.step({"player": "up"})
    game.reset(seed=0)
    with pytest.raises(GameError, match="no answer from active agent"):
        game.step({})
    with pytest.raises(GameError, match="whose turn it is not"):
        game.step({"player": "up", "ghost": "up"})
    play(game, ["right", "down"])
    with pytest.raises(GameError, match="episode is over"):
        game.step({"player": "up"})


def test_same_seed_same_episode_and_random_maps_differ():
    game = tsmg.make("FrozenLake-Slippery-v0")

    def trace(seed):
        observations, _ = game.reset(seed=seed)
        out = [observations["player"]]
        while not game.done:
            out.append(game.step({"player": "right"}).observations["player"])
        return out

    assert trace(7) == trace(7)
    assert len({trace(seed)[0] for seed in range(10)}) > 5


def test_unknown_id_suggests_close_ids():
    with pytest.raises(UnknownGameError, match="FrozenLake-NoSlip-v0"):
        tsmg.make("FrozenLake-NoSlp-v0")


def test_unversioned_id_resolves_to_latest_version():
    assert tsmg.make("FrozenLake").game_id == "FrozenLake-v0"


def test_bad_options_name_the_field_and_allowed_values():
    with pytest.raises(GameOptionsError, match=r"map_name.*'4x4', '8x8' or 'random'"):
        tsmg.make("FrozenLake-v0", map_name="5x5")
    with pytest.raises(GameOptionsError, match=r"sise: unknown option \(options: .*size"):
        tsmg.make("FrozenLake-v0", sise=5)
    with pytest.raises(GameOptionsError, match="max_steps"):
        tsmg.make("FrozenLake-v0", max_steps="many")


def test_register_and_make_a_custom_variant():
    spec = tsmg.register("test/TinyLake-v3", "games.frozen_lake:FrozenLake", desc=("SH", "FG"), max_steps=2)
    try:
        game = tsmg.make("test/TinyLake-v3")
        assert spec.version == 3 and game.game_id == "test/TinyLake-v3"
        game.reset(seed=0)
        assert game.step({"player": "down"}).rewards == {"player": 0.0}
        assert game.step({"player": "right"}).rewards == {"player": 1.0}
    finally:
        tsmg.registry.unregister("test/TinyLake-v3")


def test_random_map_generation_matches_gymnasium_guarantee():
    import numpy as np

    rng = np.random.default_rng(0)
    for _ in range(200):
        desc = rules.generate_random_map(rng, size=6, p_frozen=0.6)
        assert desc[0][0] == "S" and desc[-1][-1] == "G" and rules.has_path(desc)


def test_slippery_oracle_matches_value_iteration_probability():
    """The oracle's empirical success equals the exact success probability (within noise)."""
    from tsmg.policies import OraclePolicy
    from tsmg.rollout import rollout

    episodes = rollout("FrozenLake-Slippery-v0", OraclePolicy(), seeds=range(300))
    game = tsmg.make("FrozenLake-Slippery-v0")
    expected = 0.0
    for seed in range(300):
        game.reset(seed=seed)
        expected += rules.success_probability(game.state.desc, game.state.position, 15, slippery=True)
    expected /= 300
    observed = sum(e.success["player"] for e in episodes) / 300
    assert abs(observed - expected) < 0.09, (observed, expected)


def test_three_invalid_answers_in_a_row_forfeit():
    game = tsmg.make("FrozenLake-v0", invalid_penalty=0.25)
    game.reset(seed=0)
    game.step({"player": "fly"})
    game.step({"player": "down"})  # a valid answer resets the count
    results = [game.step({"player": answer}) for answer in ("fly", Invalid("no tag"), "d")]
    assert [r.infos["player"].get("forfeit", False) for r in results] == [False, False, True]
    assert results[-1].terminated["player"] and not results[-1].truncated["player"] and game.done
    assert results[-1].rewards["player"] == -0.25 - 1.0  # the penalty, then the forfeit: a loss
    assert game.episode_returns()["player"] == -4 * 0.25 - 1.0 and game.forfeited == ("player",)
    assert game.is_success("player") is False


def test_forfeits_can_be_switched_off_and_the_step_limit_still_ends_the_episode():
    game = tsmg.make("FrozenLake-v0", forfeit_after=None, max_steps=5)
    game.reset(seed=0)
    results = [game.step({"player": "fly"}) for _ in range(5)]
    assert results[-1].truncated["player"] and not results[-1].terminated["player"] and game.forfeited == ()


def test_ms_grpo_settings_follow_the_authors_default_action_rule():
    for game_id in ("FrozenLake-NoSlip-v0", "FrozenLake-Slippery-v0", "FrozenLake-BigSlippery-v0", "Snake-v0"):
        game = tsmg.make(game_id)
        assert (game.config.on_invalid, game.config.invalid_penalty, game.config.forfeit_after) == (
            "default_action",
            0.0,
            None,
        )
        game.reset(seed=0)
        for _ in range(5):
            if not game.done:
                info = game.step({"player": "<no answer>"}).infos["player"]
                assert info["valid"] is False and info["action"] == game.legal_actions("player")[0] or game.done
    assert tsmg.make("FrozenLake-v0").config.on_invalid == "penalize"  # the standard map: the general rule


def test_a_game_that_sets_no_step_limit_gets_the_registrys():
    from tsmg.registry import DEFAULT_MAX_STEPS

    assert tsmg.make("Blackjack-v0").config.max_steps == DEFAULT_MAX_STEPS
    assert tsmg.make("Blackjack-v0", max_steps=None).config.max_steps is None  # asked for explicitly
    assert tsmg.make("Taxi-v0").config.max_steps == 50  # a registered limit stays
