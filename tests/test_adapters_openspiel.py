"""OpenSpiel's games as tsmg games (tsmg.adapters.openspiel) and its MCTS bot as a policy."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

pyspiel = pytest.importorskip("pyspiel")

import tsmg  # noqa: E402
from games.registrations_openspiel import CHECKER_FAILURES, OPENSPIEL_GAMES  # noqa: E402
from tests.test_fork import OBSERVABLE, play_on, reference, view  # noqa: E402
from tsmg.adapters.openspiel import (  # noqa: E402
    REFUSED,
    OpenSpielGame,
    UnplayableGameError,
    family,
    refusal_reason,
)
from tsmg.adapters.openspiel_bots import MCTSPolicy  # noqa: E402
from tsmg.apps.cli import main  # noqa: E402
from tsmg.checker import check_game  # noqa: E402
from tsmg.core import GameError, Invalid  # noqa: E402
from tsmg.lap import LAP, LAPConfig  # noqa: E402
from tsmg.policies import DecisionRequest, RandomPolicy, policy_from_spec  # noqa: E402
from tsmg.registry import GameOptionsError, UnknownGameError  # noqa: E402
from tsmg.rollout import rollout  # noqa: E402

OPENSPIEL_IDS = [spec.id for spec in tsmg.specs() if spec.id.startswith("OpenSpiel/")]
GOOFSPIEL = "openspiel:goofspiel(num_cards=4,points_order=descending)"


def _loads_with_defaults() -> dict[str, object]:
    games = {}
    for name in pyspiel.registered_names():
        try:
            game = pyspiel.load_game(name)
        except (pyspiel.SpielError, IndexError):  # nfg_game without its file: map::at
            continue
        # OpenSpiel registers its Python games (python_kuhn_poker, chat_game, ...) only once
        # open_spiel.python.games is imported (open_spiel.python.policy does, for exploitability), and a
        # test below registers python_tsmg_twins: the C++ games alone, whichever tests ran before.
        if type(game).__module__.split(".")[0] == "pyspiel":  # C++ games: pyspiel, pyspiel.blackjack, ...
            games[name] = game
    return games


# ------------------------------------------------------------------------------ making games
def test_openspiel_ids_take_openspiels_own_parameter_syntax():
    game = tsmg.make(GOOFSPIEL)
    assert isinstance(game, OpenSpielGame) and game.game_id == GOOFSPIEL
    assert game.agents == ("player_0", "player_1") and not game.turn_based
    observations, _ = game.reset(seed=0)
    assert game.active_agents == ("player_0", "player_1")  # a simultaneous round
    assert game.legal_actions("player_0") == ["[P0]Bid: 1", "[P0]Bid: 2", "[P0]Bid: 3", "[P0]Bid: 4"]
    assert "Current point card: 4" in observations["player_0"]  # descending: the 4 comes first, no chance
    assert game.pyspiel_game.get_parameters()["num_cards"] == 4
    description = "OpenSpiel's goofspiel(num_cards=4,points_order=descending) [simultaneous, 2 players]."
    assert tsmg.spec(GOOFSPIEL).description == description


def test_bad_names_parameters_and_refused_games_get_one_clear_sentence(capsys):
    with pytest.raises(UnknownGameError, match=r"OpenSpiel has no game 'leduc_pokr'\. Did you mean: leduc_poker"):
        tsmg.make("openspiel:leduc_pokr")
    with pytest.raises(GameOptionsError, match=r"OpenSpiel cannot load 'goofspiel\(num_cards=x\)': .*num_cards"):
        tsmg.make("openspiel:goofspiel(num_cards=x)")
    with pytest.raises(UnplayableGameError, match="mfg_garnet cannot be played as a tsmg game: it is a mean-field"):
        tsmg.make("openspiel:mfg_garnet")
    for line, expected in (
        (["check", "openspiel:leduc_pokr"], "Did you mean: leduc_poker"),
        (["check", "openspiel:kuhn_poker(players=x)"], "OpenSpiel cannot load 'kuhn_poker(players=x)'"),
        (["check", "openspiel:crossword"], "crossword cannot be played as a tsmg game: it has no discrete actions"),
        (["check", "openspiel:nfg_game"], "OpenSpiel cannot load 'nfg_game': map::at"),
    ):
        assert main(line) == 2
        error = capsys.readouterr().err
        assert expected in error and "Traceback" not in error
        assert [text for text in error.splitlines() if text.startswith("error:")] == [error.splitlines()[-1]]


def test_games_made_from_many_threads_leave_stderr_where_it_was():
    """Loading silences OpenSpiel's C++ stderr; threads take turns, so the real stderr always comes back."""
    before = os.fstat(2)
    with ThreadPoolExecutor(16) as pool:
        made = list(pool.map(lambda _: tsmg.make("openspiel:leduc_poker"), range(64)))
    after = os.fstat(2)
    assert len(made) == 64 and (before.st_dev, before.st_ino) == (after.st_dev, after.st_ino)


def test_the_refused_list_is_what_openspiel_says_and_does_not_grow():
    found = {name: refusal_reason(game) for name, game in _loads_with_defaults().items()}
    assert {name for name, reason in found.items() if reason} == set(REFUSED)
    assert all(found[name] == reason for name, reason in REFUSED.items())
    assert len(REFUSED) <= 10 and not CHECKER_FAILURES  # the refusals may shrink, never grow
    for name in REFUSED:
        with pytest.raises(UnplayableGameError, match=f"OpenSpiel's {name} cannot be played"):
            tsmg.make(f"openspiel:{name}")


def test_the_docs_list_exactly_the_refused_games():
    section = (Path(__file__).resolve().parent.parent / "docs" / "openspiel.md").read_text()
    rows = re.findall(r"^\| ([a-z0-9_, ]+) \| ", section, re.MULTILINE)
    assert sorted(name.strip() for row in rows for name in row.split(",")) == sorted(REFUSED)
    assert f"`OpenSpiel/<name>-v0` for the {len(OPENSPIEL_GAMES)} games" in section


def test_registered_ids_are_every_playable_default_game_with_its_family():
    loaded = _loads_with_defaults()
    playable = sorted(set(loaded) - set(REFUSED) - set(CHECKER_FAILURES))
    assert [name for name, _, _ in OPENSPIEL_GAMES] == playable
    assert len(OPENSPIEL_IDS) == len(playable) >= 100
    for name, game_family, players in OPENSPIEL_GAMES:
        assert (family(loaded[name]), loaded[name].num_players()) == (game_family, players), name
    assert {game_family for _, game_family, _ in OPENSPIEL_GAMES} == {
        "board", "dice", "card", "hidden", "simultaneous", "cooperative", "single-player",
    }  # fmt: skip
    listed = {item["id"]: item for item in json.loads(_cli_stdout(["games", "--json"]))}
    assert listed["OpenSpiel/leduc_poker-v0"]["description"] == "OpenSpiel's leduc_poker [card, 2 players]."
    assert listed["OpenSpiel/goofspiel-v0"]["turn_based"] is False
    assert listed["OpenSpiel/bridge-v0"]["num_agents"] == 4


def _cli_stdout(arguments: list[str]) -> str:
    command = [sys.executable, "-m", "tsmg.apps.cli", *arguments]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return result.stdout


# ------------------------------------------------------------------------------ the checker
#: Bridge scores each deal by double-dummy analysis (about 0.35 s a deal here): checked on fewer episodes.
_FEWER_EPISODES = {"OpenSpiel/bridge-v0": {"seeds": (0,), "nonsense_seeds": 2}}


@pytest.mark.parametrize("game_id", OPENSPIEL_IDS)
def test_the_checker_passes_on_every_registered_openspiel_id(game_id):
    """Five random-play seeds (20 rounds each, hostile answers included), 10 nonsense-vs-random seeds per seat.

    62 s for the 104 ids on 2 shared cores, 40 s of CPU (docs/openspiel.md).
    """
    settings = {"seeds": (0, 1, 2, 3, 4), "nonsense_seeds": 10, **_FEWER_EPISODES.get(game_id, {})}
    report = check_game(game_id, max_rounds=20, **settings)
    assert report.hostile_answers_checked > 0 and set(report.nonsense) == set(tsmg.make(game_id).agents)


# ------------------------------------------------------------------------------ what a seat sees
def _deal(game_id: str, seed: int) -> tuple[int, ...]:
    game = tsmg.make(game_id)
    game.reset(seed=seed)
    return tuple(game.state.history())


def test_a_seat_never_sees_another_seats_private_cards():
    game = tsmg.make("openspiel:leduc_poker")
    by_own_card: dict[int, set[str]] = {}
    other_cards: dict[int, set[int]] = {}
    for seed in range(40):
        game.reset(seed=seed)
        own, other = game.state.history()[:2]
        by_own_card.setdefault(own, set()).add(game.observe("player_0"))
        other_cards.setdefault(own, set()).add(other)
    # Deals that differ only in player_1's card look the same to player_0.
    assert all(len(texts) == 1 for texts in by_own_card.values()) and max(map(len, other_cards.values())) > 1
    game = tsmg.make("openspiel:leduc_poker", view="raw")  # the raw text is OpenSpiel's observation string
    game.reset(seed=39)
    observation = game.observe("player_0")
    assert observation.splitlines()[1] == game.state.observation_string(0)
    assert "[Private: " in observation and game.state.observation_string(1).split("]")[1] not in observation


def test_a_game_without_observation_strings_shows_the_information_state():
    game = tsmg.make("openspiel:liars_dice", view="raw")
    game.reset(seed=3)
    assert game.observe("player_1").splitlines()[1] == game.state.information_state_string(1)
    assert game.state_key("player_1") == (1, game.state.information_state_string(1))


def test_same_seed_same_deal_in_another_process():
    ids = ["openspiel:leduc_poker", "OpenSpiel/backgammon-v0", "openspiel:goofspiel"]
    here = {game_id: [_deal(game_id, seed) for seed in range(5)] for game_id in ids}
    code = (
        "import json, tsmg\n"
        f"ids = {ids!r}\n"
        "out = {}\n"
        "for game_id in ids:\n"
        "    out[game_id] = []\n"
        "    for seed in range(5):\n"
        "        game = tsmg.make(game_id)\n"
        "        game.reset(seed=seed)\n"
        "        out[game_id].append(list(game.state.history()))\n"
        "print(json.dumps(out))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    there = {game_id: [tuple(deal) for deal in deals] for game_id, deals in json.loads(result.stdout).items()}
    assert there == here
    assert len(set(here["openspiel:leduc_poker"])) > 1  # the seed does change the deal


class TwinsGame(pyspiel.Game):
    """A one-move OpenSpiel game (OpenSpiel's Python game API) whose actions 0 and 1 are both written "Pass"."""

    TYPE = pyspiel.GameType(
        short_name="python_tsmg_twins",
        long_name="Python tsmg twins",
        dynamics=pyspiel.GameType.Dynamics.SEQUENTIAL,
        chance_mode=pyspiel.GameType.ChanceMode.DETERMINISTIC,
        information=pyspiel.GameType.Information.PERFECT_INFORMATION,
        utility=pyspiel.GameType.Utility.GENERAL_SUM,
        reward_model=pyspiel.GameType.RewardModel.TERMINAL,
        max_num_players=1,
        min_num_players=1,
        provides_information_state_string=False,
        provides_information_state_tensor=False,
        provides_observation_string=True,
        provides_observation_tensor=False,
        parameter_specification={},
    )
    INFO = pyspiel.GameInfo(
        num_distinct_actions=3, max_chance_outcomes=0, num_players=1, min_utility=0.0, max_utility=2.0,
        utility_sum=None, max_game_length=1,
    )  # fmt: skip

    def __init__(self, params=None):
        super().__init__(self.TYPE, self.INFO, params or {})

    def new_initial_state(self):
        return TwinsState(self)

    def make_py_observer(self, iig_obs_type=None, params=None):
        return TwinsObserver()


class TwinsState(pyspiel.State):
    def __init__(self, game):
        super().__init__(game)
        self.value = None

    def current_player(self):
        return pyspiel.PlayerId.TERMINAL if self.value is not None else 0

    def _legal_actions(self, player):
        return [0, 1, 2]

    def _apply_action(self, action):
        self.value = float(action)

    def _action_to_string(self, player, action):
        return "Pass" if action < 2 else "Bet"

    def is_terminal(self):
        return self.value is not None

    def returns(self):
        return [self.value or 0.0]

    def __str__(self):
        return "start" if self.value is None else f"took {self.value}"


class TwinsObserver:
    def __init__(self):
        self.tensor, self.dict = np.zeros(0), {}

    def set_from(self, state, player):
        pass

    def string_from(self, state, player):
        return str(state)


def test_moves_openspiel_writes_alike_get_their_action_numbers():
    if TwinsGame.TYPE.short_name not in pyspiel.registered_names():
        pyspiel.register_game(TwinsGame.TYPE, TwinsGame)
    game = tsmg.make("openspiel:python_tsmg_twins")
    observations, _ = game.reset(seed=0)
    assert game.legal_actions("player_0") == ["Pass (action 0)", "Pass (action 1)", "Bet"]
    assert observations["player_0"].endswith("as written):\nPass (action 0)\nPass (action 1)\nBet")
    assert isinstance(game.parse("player_0", "Pass"), Invalid)  # it names two moves
    twin = game.fork()
    assert game.step({"player_0": "pass (action 1)"}).rewards == {"player_0": 1.0}
    assert twin.step({"player_0": "Pass (action 0)"}).rewards == {"player_0": 0.0}
    check_game(tsmg.make("openspiel:python_tsmg_twins"), nonsense_seeds=10)


def test_more_than_64_moves_are_not_listed_and_are_read_strictly():
    game = tsmg.make("openspiel:go(board_size=9)", view="raw")
    observations, _ = game.reset(seed=0)
    legal = game.legal_actions("player_0")
    assert len(legal) == 82 and "B a1" in legal
    assert "82 legal moves, too many to list" in observations["player_0"] and "B c3" not in observations["player_0"]
    assert game.parse("player_0", "**b A1.**") == game.move_action("player_0", "B a1")
    assert game.parse("player_0", "A1") == game.move_action("player_0", "B a1")  # go's own notation (openspiel_answers)
    for answer in ("a1 b1", "B a1 please", "B z9"):
        reason = game.parse("player_0", answer)
        assert isinstance(reason, Invalid) and "one of the 82 legal moves in OpenSpiel's notation" in reason.reason
    request = DecisionRequest(game, "player_0", observations["player_0"], legal)
    [message] = [m["content"] for m in LAP(None, LAPConfig()).messages(request) if m["role"] == "user"]  # type: ignore[arg-type]
    assert "B c3" not in message and "82 actions are valid, too many to list" in message
    small = tsmg.make("openspiel:tic_tac_toe", view="raw")
    small.reset(seed=0)
    assert "Your legal moves: x(0,0), x(0,1)" in small.observe("player_0")


def test_openspiels_refusal_of_a_move_is_an_invalid_answer_and_the_state_stays():
    class OfferingTakenCells(OpenSpielGame):
        """A text layer that reads a cell number as the move, legal or not: OpenSpiel has the last word."""

        def _read(self, agent, text):
            return int(text)

    game = OfferingTakenCells(game="tic_tac_toe")
    game.reset(seed=0)
    game.step({"player_0": "4"})
    game.step({"player_1": "0"})
    before = str(game.state)
    result = game.step({"player_0": "4"})  # taken
    info = result.infos["player_0"]
    assert info["valid"] is False and info["reason"].startswith("OpenSpiel refused the move:")
    assert str(game.state) == before and game.active_agents == ("player_0",)


# ------------------------------------------------------------------------------ the referee's rules
def test_an_invalid_answer_voids_a_simultaneous_round_and_three_forfeit_on_the_minimum_utility():
    game = tsmg.make(GOOFSPIEL)
    game.reset(seed=0)
    history = game.state.history()
    result = game.step({"player_0": "[P0]Bid: 4", "player_1": "five"})
    assert result.infos["player_1"]["valid"] is False and result.infos["player_0"]["round_void"]
    assert game.state.history() == history  # OpenSpiel needs both bids: nothing was played
    game.step({"player_0": "[P0]Bid: 4", "player_1": "five"})
    result = game.step({"player_0": "[P0]Bid: 4", "player_1": "five"})
    assert game.done and result.infos["player_1"]["forfeit"]
    assert game.episode_returns() == {"player_0": 0.0, "player_1": game.pyspiel_game.min_utility()}
    kuhn = tsmg.make("openspiel:kuhn_poker")
    kuhn.reset(seed=0)
    kuhn.step({"player_0": "Bet"})
    for _ in range(3):
        kuhn.step({"player_1": "raise"})
    assert kuhn.forfeited == ("player_1",) and kuhn.episode_returns() == {"player_0": 0.0, "player_1": -2.0}


def test_returns_are_openspiels_and_a_step_limit_truncates():
    game = tsmg.make("openspiel:kuhn_poker")
    game.reset(seed=0)
    result = game.step({"player_0": "Bet"})
    result = game.step({"player_1": "Pass"})
    assert result.terminated == {"player_0": True, "player_1": True} and not any(result.truncated.values())
    assert game.episode_returns() == {"player_0": 1.0, "player_1": -1.0}
    assert game.is_success("player_0") is True and game.is_success("player_1") is False
    short = tsmg.make("OpenSpiel/tic_tac_toe-v0", max_steps=2)
    short.reset(seed=0)
    short.step({"player_0": "x(1,1)"})
    result = short.step({"player_1": "o(0,0)"})
    assert short.done and result.truncated == {"player_0": True, "player_1": True}
    assert not any(result.terminated.values()) and not short.state.is_terminal()


def test_each_step_pays_the_change_in_openspiels_return():
    """Cliff walking pays -1 every step: the step rewards add up to OpenSpiel's own return, not to a running sum."""
    game = tsmg.make("OpenSpiel/cliff_walking-v0")
    game.reset(seed=0)
    rewards = [game.step({"player_0": "UP"}).rewards["player_0"] for _ in range(4)]
    assert rewards == [-1.0] * 4
    assert game.episode_returns() == {"player_0": game.state.returns()[0]} == {"player_0": -4.0}


def test_chance_is_drawn_with_openspiels_outcome_probabilities():
    """2048 places a 4 with probability 0.1 (and a 2 with 0.9): the seeded draw keeps those weights."""
    from tsmg.adapters.openspiel import _resolve_chance

    rng = np.random.default_rng(0)
    fours = 0
    draws = 2_000
    for _ in range(draws):
        state = pyspiel.load_game("2048").new_initial_state()
        _resolve_chance(state, rng)
        fours += str(state).count("4")
    assert 0.07 < fours / (2 * draws) < 0.13  # two tiles placed at the start, each a 4 with probability 0.1


@pytest.mark.parametrize("game_id", ["openspiel:leduc_poker", "OpenSpiel/backgammon-v0", GOOFSPIEL, "OpenSpiel/pig-v0"])
def test_a_fork_clones_the_state_and_the_chance_to_come(game_id):
    def play(game, rounds, rng):
        trace = []
        for _ in range(rounds):
            if game.done:
                break
            answers = {agent: game.legal_actions(agent)[int(rng.integers(len(game.legal_actions(agent))))]
                       for agent in game.active_agents}  # fmt: skip
            result = game.step(answers)
            trace.append((answers, result.observations, result.rewards, game.state.history()))
        return trace

    game = tsmg.make(game_id)
    game.reset(seed=5)
    play(game, 3, np.random.default_rng(0))
    twin = game.fork()
    assert game.fork_mode == "snapshot" and twin.state is not game.state
    assert play(twin, 40, np.random.default_rng(1)) == play(game, 40, np.random.default_rng(1))
    assert twin.episode_returns() == game.episode_returns()


@pytest.mark.parametrize("game_id", OPENSPIEL_IDS)
def test_every_openspiel_id_forks_into_an_independent_copy(game_id):
    """tests/test_fork.py's check, one seed: the fork and the original each replay the reference from the fork on."""
    answers, views = reference(game_id, 0)
    fork_round = len(answers) // 2
    game = tsmg.make(game_id, max_steps=60)  # the reference's step limit (tests/test_fork.py: MAX_ROUNDS)
    game.reset(seed=0)
    play_on(game, answers[:fork_round])
    twin = game.fork()
    assert view(twin) == view(game) == views[fork_round][:OBSERVABLE]
    assert play_on(twin, answers[fork_round:]) == views[fork_round + 1 :]
    assert view(game) == views[fork_round][:OBSERVABLE]
    assert play_on(game, answers[fork_round:]) == views[fork_round + 1 :]


# ------------------------------------------------------------------------------ OpenSpiel's MCTS bot
def test_mcts_is_a_model_spec_with_options_and_clear_refusals():
    policy = policy_from_spec("openspiel-mcts", seed=3, model_options={"simulations": 20, "uct_c": 1})
    assert isinstance(policy, MCTSPolicy) and (policy.simulations, policy.uct_c, policy.seed) == (20, 1.0, 3)
    with pytest.raises(ValueError, match="openspiel-mcts has no model option depth; its options: simulations"):
        policy_from_spec("openspiel-mcts", model_options={"depth": 3})
    with pytest.raises(ValueError, match="simulations must be an integer"):
        policy_from_spec("openspiel-mcts", model_options={"simulations": "many"})
    for game_id, reason in (
        (GOOFSPIEL, "its moves are simultaneous"),
        ("openspiel:liars_dice", "cannot resample a world from a seat's information state"),
        ("TicTacToe-v0", "plays OpenSpiel games only"),
    ):
        game = tsmg.make(game_id)
        game.reset(seed=0)
        agent = game.active_agents[0]
        request = DecisionRequest(game, agent, game.observe(agent), game.legal_actions(agent))
        with pytest.raises(ValueError, match=reason):
            policy.act([request])


def test_mcts_is_seeded_by_the_plan_and_beats_random_play():
    def games(seed):
        mcts = MCTSPolicy(seed, simulations=50)
        episodes = rollout("OpenSpiel/tic_tac_toe-v0", {"player_0": mcts, "player_1": RandomPolicy(0)}, seeds=range(8))
        return [[step.parsed_action for step in episode.steps] for episode in episodes], episodes

    first, episodes = games(0)
    assert games(0)[0] == first and games(1)[0] != first  # the policy seed and the plan decide, nothing else
    assert all(episode.returns["player_0"] >= 0 for episode in episodes)  # never loses to random play
    assert sum(episode.returns["player_0"] for episode in episodes) >= 6


def test_mcts_searches_a_world_drawn_from_its_own_information_not_the_true_one():
    """In Leduc, deals that differ only in the other seat's card give the bot the same decision."""
    policy = MCTSPolicy(0, simulations=200)
    decisions: dict[int, set[str]] = {}
    for seed in range(30):
        game = tsmg.make("openspiel:leduc_poker")
        game.reset(seed=seed)
        request = DecisionRequest(game, "player_0", game.observe("player_0"), game.legal_actions("player_0"))
        decisions.setdefault(game.state.history()[0], set()).add(policy.act([request])[0].action)
    assert all(len(actions) == 1 for actions in decisions.values())


def test_tsmg_eval_plays_mcts_against_random_on_an_openspiel_game(tmp_path, capsys):
    code = main([
        "eval", "--game", "openspiel:kuhn_poker", "--model", "random", "--model", "openspiel-mcts",
        "--model-option", "openspiel-mcts:simulations=30", "--episodes", "4", "--out", str(tmp_path / "run"),
        "--no-progress",
    ])  # fmt: skip
    output = capsys.readouterr().out
    assert code == 0 and "8/8 episodes completed" in output and "openspiel-mcts" in output
    assert json.loads((tmp_path / "run" / "config.json").read_text())["model_options"] == {
        "openspiel-mcts": {"simulations": 30}
    }


def test_game_errors_are_not_swallowed():
    game = tsmg.make("openspiel:kuhn_poker")
    with pytest.raises(GameError, match="no episode in progress"):
        game.observe("player_0")
    game.reset(seed=0)
    with pytest.raises(GameError, match="unknown agent 'player_7'"):
        game.observe("player_7")


# ------------------------------------------------------------------------------ exact exploitability
class KuhnNash:
    """The hand-written solver's Nash strategy (alpha = 1/6), read from OpenSpiel's information-state string."""

    name = "kuhn-nash"

    def move_probabilities(self, request):
        from games import kuhn_poker_rules as rules

        text = request.game.state.information_state_string(request.game.player(request.agent))
        card, history = int(text[0]), text[1:].replace("p", "k")  # before a decision, a pass is a check
        first, second = rules.nash_strategy(1 / 6)[(card, history)]  # in the order of rules.legal_actions
        if rules.facing_bet(history):  # (call, fold): OpenSpiel's Bet calls, its Pass folds
            return {"Pass": second, "Bet": first}
        return {"Pass": first, "Bet": second}  # (check, bet)

    def act(self, requests):  # pragma: no cover - only its probabilities are read
        raise NotImplementedError


def test_openspiels_exploitability_equals_the_hand_written_kuhn_solver():
    from games import kuhn_poker_rules as rules
    from games.kuhn_poker_exploitability import kuhn_exploitability
    from tsmg.adapters.openspiel_tabular import openspiel_exploitability
    from tsmg.policies import FixedPolicy

    random_play = openspiel_exploitability(RandomPolicy(), "openspiel:kuhn_poker")
    assert random_play.exploitability == pytest.approx(kuhn_exploitability(RandomPolicy()).exploitability, abs=1e-9)
    assert random_play.exploitability == pytest.approx(11 / 24, abs=1e-9)
    assert random_play.best_response == pytest.approx(kuhn_exploitability(RandomPolicy()).best_response, abs=1e-9)
    aggressive = {(card, history): (0.0, 1.0) for card, history in rules.information_sets()}  # check, bet
    for card, history in rules.information_sets():
        if rules.facing_bet(history):
            aggressive[(card, history)] = (1.0, 0.0)  # call, fold
    always_bet = openspiel_exploitability(FixedPolicy("Bet"), "OpenSpiel/kuhn_poker-v0")
    assert always_bet.exploitability == pytest.approx(rules.exploitability(aggressive), abs=1e-9)
    nash = openspiel_exploitability(KuhnNash(), "openspiel:kuhn_poker")
    assert nash.exploitability == pytest.approx(0.0, abs=1e-9)
    assert nash.best_response == pytest.approx((-1 / 18, 1 / 18), abs=1e-9)
    assert nash.strategy["0"] == pytest.approx({"Pass": 5 / 6, "Bet": 1 / 6})  # the J bluffs at alpha


def test_tsmg_exploitability_on_openspiel_games_from_the_command_line(capsys):
    assert main(["exploitability", "--game", "openspiel:kuhn_poker", "--model", "random", "--json"]) == 0
    [report] = json.loads(capsys.readouterr().out)
    assert report["exploitability"] == pytest.approx(0.458333333, abs=1e-9) and len(report["strategy"]) == 12
    assert main(["exploitability", "--game", "openspiel:leduc_poker", "--model", "random"]) == 0
    assert "| random | 1 | 2.3736 | +2.0875 | +2.6597 |" in capsys.readouterr().out  # OpenSpiel's NashConv 4.7472 / 2
    assert main(["exploitability", "--game", "openspiel:kuhn_poker(players=3)", "--model", "random"]) == 2
    assert "needs a two-player zero-sum game" in capsys.readouterr().err  # goofspiel: tests/test_openspiel_bots.py
    assert main(["exploitability", "--game", "openspiel:leduc_poker", "--model", "openspiel-mcts"]) == 2
    assert "move probabilities of 'openspiel-mcts' cannot be read" in capsys.readouterr().err


@pytest.fixture(scope="module")
def sharp_backend(tmp_path_factory):
    """A tiny model whose move probabilities are far from one half (as tests/evaluation/test_exploitability.py)."""
    import torch

    from backends.hf import HFBackend
    from backends.tiny import build_tiny_model

    backend = HFBackend(build_tiny_model(tmp_path_factory.mktemp("kuhn"), seed=3), threads=1)
    with torch.no_grad():
        backend.model.lm_head.weight.mul_(12.0)
    return backend


def test_a_models_exploitability_through_openspiel_is_the_hand_written_solvers(sharp_backend):
    """The model's exact choice probabilities at every information state; both solvers on that strategy agree."""
    from games import kuhn_poker_rules as rules
    from tsmg.adapters.openspiel_tabular import openspiel_exploitability

    lap = LAP(sharp_backend, LAPConfig.model_validate({"action_format": {"kind": "choice"}}))
    report = openspiel_exploitability(lap, "openspiel:kuhn_poker")
    strategy = {}
    for text, probabilities in report.strategy.items():
        card, history = int(text[0]), text[1:].replace("p", "k")
        pair = (probabilities["Bet"], probabilities["Pass"]) if rules.facing_bet(history) else (
            probabilities["Pass"], probabilities["Bet"])  # fmt: skip
        strategy[(card, history)] = pair
    assert len(strategy) == 12 and any(abs(pair[0] - 0.5) > 0.1 for pair in strategy.values())
    assert report.exploitability == pytest.approx(rules.exploitability(strategy), abs=1e-9)
    assert report.best_response == pytest.approx(
        (rules.best_response_value(strategy, 0), rules.best_response_value(strategy, 1)), abs=1e-9
    )
