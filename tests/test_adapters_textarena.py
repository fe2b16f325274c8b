"""TextArena's environments as tsmg games (tsmg.adapters.textarena)."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

textarena = pytest.importorskip("textarena")

import tsmg  # noqa: E402
from games.registrations_textarena import CHECKER_FAILURES, TEXTARENA_GAMES, tsmg_id  # noqa: E402
from tests.test_fork import OBSERVABLE, answers_for, play_on, view  # noqa: E402
from tsmg.adapters.textarena import TextArenaGame, UnplayableGameError, base_env_ids, refused_games  # noqa: E402
from tsmg.adapters.textarena_moves import LISTED_MOVES  # noqa: E402
from tsmg.adapters.textarena_refusals import ALWAYS, PROBED  # noqa: E402
from tsmg.apps.cli import main  # noqa: E402
from tsmg.checker import check_game  # noqa: E402
from tsmg.core import GameCodeError, GameError, Invalid  # noqa: E402
from tsmg.policies import RandomPolicy  # noqa: E402
from tsmg.registry import GameOptionsError, UnknownGameError  # noqa: E402
from tsmg.rollout import rollout  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TEXTARENA_IDS = [spec.id for spec in tsmg.specs() if spec.id.startswith("TextArena/")]
SPIRAL = ["TextArena/KuhnPoker-v0", "TextArena/TicTacToe-v0", "TextArena/SimpleNegotiation-v0"]


def _random_episode(game_id: str, seed: int, **options: Any) -> list[tuple[str, ...]]:
    """Every seat's observation after each round of a seeded random-play episode."""
    game = tsmg.make(game_id, **options)
    observations, _ = game.reset(seed=seed)
    seen = [tuple(observations.values())]
    rng = random.Random(seed)
    while not game.done:
        [agent] = game.active_agents
        legal = game.legal_actions(agent)
        if not legal:  # an open game whose messages announce no move now (Minesweeper, after its examples)
            break
        seen.append(tuple(game.step({agent: rng.choice(legal)}).observations.values()))
    return seen


# ------------------------------------------------------------------------------ making games
def test_textarena_ids_are_games_with_textarenas_players_and_announced_moves():
    game = tsmg.make("textarena:TicTacToe-v0")
    assert isinstance(game, TextArenaGame) and game.agents == ("player_0", "player_1") and game.turn_based
    observations, _ = game.reset(seed=0)
    assert game.active_agents == ("player_0",)
    assert game.legal_actions("player_0") == [f"[{cell}]" for cell in range(9)] and game.legal_actions("player_1") == []
    assert "You are Player 0 in Tic Tac Toe" in observations["player_0"]
    assert observations["player_0"].endswith("Your legal moves: [0], [1], [2], [3], [4], [5], [6], [7], [8].")
    assert observations["player_1"].endswith("Waiting for player_0.")
    assert tsmg.spec("textarena:TicTacToe-v0").description == "TextArena's TicTacToe-v0 [2 players]."
    assert tsmg.make("textarena:ThreePlayerTicTacToe-v0").agents == ("player_0", "player_1", "player_2")
    assert tsmg.make("TextArena/KuhnPoker-v0-long").config.num_players == 2


def test_bad_ids_player_counts_and_refused_environments_get_one_clear_sentence(capsys):
    with pytest.raises(
        UnknownGameError, match=r"TextArena has no environment 'TicTacToe-v9'\. Did you mean: TicTacToe-v0"
    ):
        tsmg.make("textarena:TicTacToe-v9")
    with pytest.raises(GameOptionsError, match="TextArena's TicTacToe-v0 does not start with 3 players"):
        tsmg.make("textarena:TicTacToe-v0", num_players=3)
    with pytest.raises(UnplayableGameError, match="Wordle-v0 cannot be played as a tsmg game: it reads NLTK's words"):
        tsmg.make("textarena:Wordle-v0")
    for line, expected in (
        (["check", "--game", "textarena:KuhnPokr-v0"], "Did you mean: KuhnPoker-v0"),
        (
            ["check", "--game", "textarena:Debate-v0"],
            "Debate-v0 cannot be played as a tsmg game: its outcome is judged",
        ),
        (
            ["rollout", "--game", "textarena:TicTacToe-v0", "--model", "random", "-o", "num_players=5"],
            "not start with 5",
        ),
    ):
        assert main(line) == 2
        error = capsys.readouterr().err
        assert expected in error and "Traceback" not in error, error
        assert [text for text in error.splitlines() if text.startswith("error:")] == [error.splitlines()[-1]]


# ------------------------------------------------------------------------------ the lists
def test_every_textarena_environment_is_registered_refused_or_a_listed_checker_failure():
    registered = {name for name, _ in TEXTARENA_GAMES}
    refused = {name.removeprefix("textarena:") for name in refused_games()}  # on this machine: what it lacks
    assert TEXTARENA_IDS == sorted(tsmg_id(name) for name, _ in TEXTARENA_GAMES)
    assert registered.isdisjoint(refused) and registered.isdisjoint(CHECKER_FAILURES)
    assert refused <= set(ALWAYS) | set(PROBED) and refused.isdisjoint(CHECKER_FAILURES)
    assert registered | refused | set(CHECKER_FAILURES) == set(base_env_ids())
    assert len(registered) >= 140 and len(refused) <= 56 and len(CHECKER_FAILURES) <= 5  # may shrink, never grow
    for name in refused:
        with pytest.raises(UnplayableGameError, match=f"TextArena's {re.escape(name)} cannot be played"):
            tsmg.make(f"textarena:{name}")


def test_every_game_drawing_from_numpys_global_generator_is_refused():
    """The adapter seeds Python's ``random`` only: a game drawing from numpy's global generator would escape seeds."""
    envs = Path(textarena.__file__).parent / "envs"
    families = {
        path.relative_to(envs).parts[0]
        for path in envs.rglob("*.py")
        if re.search(r"\b(np|numpy)\.random\.(?!default_rng|Generator|RandomState)", path.read_text(errors="replace"))
    }
    assert families == {"IteratedStagHunt", "SpellingBee"}  # Sokoban makes its own numpy generator from the seed
    for name in base_env_ids():
        if re.sub(r"-v\d+.*$", "", name) in families:
            assert name in ALWAYS, name  # refused on every machine, whatever else it finds installed


def test_tsmg_games_lists_the_refusals_apart_with_their_reasons(capsys):
    assert main(["games", "--refused", "--json"]) == 0
    refused = {item["name"]: item["reason"] for item in json.loads(capsys.readouterr().out)}
    assert {name: reason for name, reason in refused.items() if name.startswith("textarena:")} == refused_games()
    assert refused["textarena:Wordle-v0"].startswith("it reads NLTK's words and averaged_perceptron_tagger_eng")
    assert "openspiel:crossword" in refused  # one listing for every adapted library
    assert main(["games", "--refused"]) == 0
    assert "textarena:Debate-v0: its outcome is judged by hosted language models" in capsys.readouterr().out


def test_the_docs_list_exactly_the_refused_environments_and_the_checker_failures():
    page = (ROOT / "docs" / "textarena.md").read_text()
    section = page.split("**Refused, and why.**", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| ([A-Za-z0-9, -]+?) \| ", section, re.MULTILINE)
    listed = sorted(name.strip() for row in rows for name in row.split(",") if name.strip() != "TextArena environment")
    assert listed == sorted(set(ALWAYS) | set(PROBED) | set(CHECKER_FAILURES))
    assert f"`TextArena/<EnvId>` for the {len(TEXTARENA_GAMES)} environments" in page


# ------------------------------------------------------------------------------ the checker
#: Environments whose copies, steps or generators are slow (each answer is tried on a copy): 4 rounds, 1 nonsense seed.
_SLOW = frozenset(
    f"TextArena/{name}"
    for name in (
        "Crusade-v0", "Othello-v0-big", "Othello-v0-huge", "RushHour-v0", "SantoriniBaseFixed-v0", "SecretMafia-v0",
        "SettlersOfCatan-v0", "SimpleTak-v0-extreme", "SimpleTak-v0-large", "SimpleTak-v0-medium", "Sokoban-v0",
        "SpiteAndMalice-v0", "Stratego-v0", "ThreePlayerTicTacToe-v0", "UltimateTicTacToe-v0",
    )
)  # fmt: skip


@pytest.mark.parametrize("game_id", TEXTARENA_IDS)
def test_the_checker_passes_on_every_registered_textarena_id(game_id):
    """One random-play seed of 10 rounds (hostile answers included), 2 nonsense-vs-random seeds per seat.

    Episodes are cut at 10 rounds (``max_steps``), so the nonsense comparison ends too; the slow
    ones play 4 rounds and 1 nonsense seed.
    """
    rounds, nonsense = (4, 1) if game_id in _SLOW else (10, 2)
    game = tsmg.make(game_id, max_steps=rounds)
    report = check_game(game, seeds=(0,), max_rounds=rounds, nonsense_seeds=nonsense, end_within=200)
    assert set(report.nonsense) == set(game.agents) and report.steps > 0


# ------------------------------------------------------------------------------ what a seat sees
def test_a_seat_never_sees_another_seats_card():
    game = tsmg.make("TextArena/KuhnPoker-v0")
    for seed in range(6):
        game.reset(seed=seed)
        cards = game.env.state.game_state["player_cards"]
        for player, agent in enumerate(game.agents):
            own = re.findall(r"Your card is: '([JQK])'", game.observe(agent))
            # Only the seat's own card: the cards differ, so the other seat's never reached this prompt.
            assert own and set(own) == {"JQK"[cards[player]]} and cards[0] != cards[1], (seed, agent)


def test_strict_answers_textarenas_invalid_moves_are_invalid_and_the_environment_stays():
    game = tsmg.make("textarena:TicTacToe-v0", forfeit_after=10)
    game.reset(seed=0)
    assert game.step({"player_0": "**[4]**"}).infos["player_0"] == {"valid": True, "reason": None, "action": "[4]"}
    board = [row[:] for row in game.env.state.game_state["board"]]
    for answer in ("I play [5]", "[4]", "4", ""):  # a sentence, a taken cell, no brackets, nothing
        info = game.step({"player_1": answer}).infos["player_1"]
        assert info["valid"] is False and info["reason"], answer
        assert game.env.state.game_state["board"] == board and game.active_agents == ("player_1",)
    assert "TicTacToe-v0" in LISTED_MOVES
    # An open game: answers outside the announced moves go to TextArena, whose refusal is the reason.
    negotiation = tsmg.make("TextArena/SimpleNegotiation-v0")
    negotiation.reset(seed=0)
    assert isinstance(negotiation.parse("player_0", "[Offer: 500 Wheat -> 1 Wood]"), Invalid)
    info = negotiation.step({"player_0": "[Offer: 500 Wheat -> 1 Wood]"}).infos["player_0"]
    assert info["valid"] is False
    assert (
        info["reason"]
        == "TextArena rejected the move: Player 0 tried to make a trade offer without having the necessary resources."
    )
    assert negotiation.env.state.game_state.get("current_offer") is None and negotiation.active_agents == ("player_0",)
    assert negotiation.step({"player_0": "[Offer: 1 Wheat -> 1 Wood]"}).infos["player_0"]["valid"] is True
    assert "[Offer: 1 Wheat -> 1 Wood]" in negotiation.observe("player_1")


def test_three_invalid_answers_forfeit_on_a_loss():
    game = tsmg.make("textarena:TicTacToe-v0")
    game.reset(seed=0)
    for _ in range(3):
        result = game.step({"player_0": "pass"})
    assert game.done and game.forfeited == ("player_0",) and result.terminated["player_0"]
    assert game.episode_returns() == {"player_0": -1.0, "player_1": 0.0}


def test_returns_are_textarenas_and_a_step_limit_truncates():
    game = tsmg.make("textarena:TicTacToe-v0")
    game.reset(seed=0)
    for move in ("[0]", "[3]", "[1]", "[4]"):
        game.step({game.active_agents[0]: move})
    result = game.step({"player_0": "[2]"})  # three in a row for player_0
    assert game.done and result.terminated == {"player_0": True, "player_1": True}
    assert game.episode_returns() == {"player_0": 1.0, "player_1": -1.0}
    assert "The game is over. Your return: +1." in game.observe("player_0")
    short = tsmg.make("textarena:TicTacToe-v0", max_steps=2)
    short.reset(seed=0)
    short.step({"player_0": "[0]"})
    result = short.step({"player_1": "[4]"})
    assert (
        short.done and result.truncated == {"player_0": True, "player_1": True} and not any(result.terminated.values())
    )


def test_a_one_player_game_succeeds_on_textarenas_full_reward_not_on_a_partial_score():
    game = tsmg.make("TextArena/GuessTheNumber-v0")
    game.reset(seed=4)
    secret = game.env.state.game_state["game_number"]
    result = game.step({"player_0": f"[{secret}]"})
    assert game.done and result.rewards == {"player_0": 1.0} and game.is_success("player_0") is True
    game.reset(seed=4)
    wrong = iter(number for number in range(1, 21) if number != secret)
    while not game.done:  # ten wrong guesses: the turn limit, and a score for how close the last one came
        game.step({"player_0": f"[{next(wrong)}]"})
    assert 0 < game.episode_returns()["player_0"] < 1 and game.is_success("player_0") is False


# ------------------------------------------------------------------------------ seeds
_PROCESS_IDS = ["TextArena/KuhnPoker-v0", "TextArena/SimpleNegotiation-v0", "TextArena/Minesweeper-v0"]


def test_same_seed_same_episode_in_another_process_and_the_callers_random_is_untouched():
    random.seed(11)
    expected = random.random()
    random.seed(11)
    here = {game_id: [_random_episode(game_id, seed) for seed in range(3)] for game_id in _PROCESS_IDS}
    assert random.random() == expected  # the episodes drew from their own state of `random`, not the caller's
    code = (
        "import json, sys\n"
        "sys.path.insert(0, 'tests')\n"
        "from test_adapters_textarena import _random_episode\n"
        f"ids = {_PROCESS_IDS!r}\n"
        "print(json.dumps({game_id: [_random_episode(game_id, seed) for seed in range(3)] for game_id in ids}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    there = {
        game_id: [[tuple(seen) for seen in episode] for episode in episodes]
        for game_id, episodes in json.loads(result.stdout).items()
    }
    assert there == here
    assert len({episode[0] for episode in here["TextArena/KuhnPoker-v0"]}) > 1  # the seed does change the deal
    assert (
        tsmg.make("TextArena/KuhnPoker-v0").has_random_start
        and not tsmg.make("TextArena/TicTacToe-v0").has_random_start
    )


def test_a_fork_continues_as_the_original_with_the_chance_to_come():
    game = tsmg.make("TextArena/KuhnPoker-v0")
    game.reset(seed=3)
    twin = game.fork()
    rng = random.Random(0)
    while not game.done:
        [agent] = game.active_agents
        move = rng.choice(game.legal_actions(agent))
        assert game.step({agent: move}).observations == twin.step({agent: move}).observations
    assert twin.done and twin.episode_returns() == game.episode_returns()
    game.reset(seed=3)
    other = game.fork()
    other.step({other.active_agents[0]: other.legal_actions(other.active_agents[0])[0]})
    assert game.rounds == 0 and other.rounds == 1  # stepping the fork leaves the original alone


@pytest.mark.parametrize("game_id", TEXTARENA_IDS)
def test_every_textarena_id_forks_into_an_independent_copy(game_id):
    """tests/test_fork.py's check on one seed and 12 rounds: the fork and the original each replay the reference."""
    game = tsmg.make(game_id, max_steps=12)
    game.reset(seed=0)
    rng = np.random.default_rng(100)
    answers, views = [], [view(game)]
    while not game.done:  # the reference: mostly announced moves, some nonsense
        answers.append(answers_for(game, rng))
        views.append(view(game, game.step(answers[-1])))
    fork_round = len(answers) // 2
    game.reset(seed=0)
    play_on(game, answers[:fork_round])
    twin = game.fork()
    assert view(twin) == view(game) == views[fork_round][:OBSERVABLE]
    assert play_on(twin, answers[fork_round:]) == views[fork_round + 1 :]
    assert view(game) == views[fork_round][:OBSERVABLE]  # the fork's moves left the original where it was
    assert play_on(game, answers[fork_round:]) == views[fork_round + 1 :]


# ------------------------------------------------------------------------------ errors of the game
class _BrokenEnv(textarena.Env):
    """A TextArena environment whose step raises on the move ``[boom]`` (a bug of the game, not of the answer)."""

    def reset(self, num_players: int, seed: int | None = None) -> None:
        self.state = textarena.TwoPlayerState(num_players=num_players, seed=seed)
        self.state.reset(game_state={}, player_prompt_function=lambda player_id, game_state: "Say [ok] or [boom].")

    def step(self, action: str) -> tuple[bool, dict[str, Any]]:
        if "[boom]" in action:
            raise ZeroDivisionError("the game's own bug")
        if "[ok]" not in action:
            self.state.set_invalid_move(reason="say [ok]")
        return self.state.step()


def test_an_exception_of_textarenas_code_is_a_game_error_not_an_invalid_answer():
    if "TsmgBroken-v0" not in textarena.envs.registration.ENV_REGISTRY:
        textarena.register("TsmgBroken-v0", entry_point=_BrokenEnv)
    game = tsmg.make("textarena:TsmgBroken-v0")
    game.reset(seed=0)
    assert game.legal_actions("player_0") == ["[ok]"]  # [boom] is announced too; its trial raised, so it is left out
    with pytest.raises(GameCodeError, match="ZeroDivisionError"):
        game.step({"player_0": "[boom]"})
    with pytest.raises(GameError, match="unknown agent"):
        game.observe("player_7")


# ------------------------------------------------------------------------------ from the command line
def test_tsmg_eval_plays_random_on_a_textarena_game(tmp_path, capsys):
    out = tmp_path / "eval"
    command = ["eval", "--game", "textarena:TicTacToe-v0", "--model", "random", "--episodes", "4"]
    assert main([*command, "--no-progress", "--out", str(out)]) == 0, capsys.readouterr().err
    [game] = json.loads((out / "summary.json").read_text())["games"]
    [row] = game["rows"]
    assert row["game"] == "textarena:TicTacToe-v0" and row["episodes"] == 8  # 4 seeds, seats swapped
    assert sum(row["outcomes"][kind] for kind in ("wins", "draws", "losses")) == 8 and row["invalid_rate"] == 0


def test_spirals_games_are_playable_by_random_policies():
    for game_id in SPIRAL:
        episodes = rollout(
            game_id, {agent: RandomPolicy(seed=1) for agent in tsmg.make(game_id).agents}, seeds=range(2)
        )
        assert all(episode.steps and not episode.error for episode in episodes), game_id


# ------------------------------------------------------------------------------ one move per answer (issue 38)
def _decision_turn(game: TextArenaGame, seed: int) -> str:
    """Reset ``game`` and play neutral chat until a turn that takes no speech (SimpleBlindAuction's bids); its seat."""
    game.reset(seed=seed)
    while game._speaks(game.active_agents[0]):
        game.step({game.active_agents[0]: "Let us both bid low."})
    return game.active_agents[0]


def test_an_answer_naming_two_moves_is_refused_and_the_record_holds_the_one_move_played():
    """On main each of these was valid and recorded the raw text (TextArena played one of the two moves)."""
    for game_id, answer, move in (
        ("TextArena/2048-v0", "[up] [right]", "[Up]"),
        ("TextArena/PigDice-v0", "[hold] [roll]", "[roll]"),
        ("TextArena/PigDice-v0-short", "[roll] or [hold]", "[hold]"),
        ("TextArena/Surround-v0", "[up], [down]", "[up]"),
    ):
        game = tsmg.make(game_id)
        game.reset(seed=0)
        [agent] = game.active_agents
        info = game.step({agent: answer}).infos[agent]
        assert info["valid"] is False and "names 2 moves" in info["reason"] and "exactly one move" in info["reason"]
        assert move in game.legal_actions(agent), game_id
        assert game.step({agent: move.upper()}).infos[agent] == {"valid": True, "reason": None, "action": move}
    # Open text: the prisoner's dilemma talks, then decides; at a decision two moves are refused, one is recorded.
    dilemma = tsmg.make("TextArena/IteratedPrisonersDilemma-v0")
    agent = _decision_turn(dilemma, 0)
    info = dilemma.step({agent: "[Cooperate] or [Defect]"}).infos[agent]
    assert info["valid"] is False and "TextArena would play only [Defect]" in info["reason"]
    assert dilemma.step({agent: "I defect"}).infos[agent]["valid"] is False  # a sentence around a move
    assert dilemma.step({agent: "[defect]"}).infos[agent] == {"valid": True, "reason": None, "action": "[Defect]"}
    # Several bids in one answer are one move by the auction's own rules (TextArena places them all): recorded as
    # the answer TextArena executed, while a sentence around one bid is not a bid.
    auction = tsmg.make("TextArena/SimpleBlindAuction-v0-quick")
    agent = _decision_turn(auction, 0)
    info = auction.step({agent: "I bid [Bid on Item 0: 10]"}).infos[agent]
    assert info["valid"] is False and "answer [Bid on Item 0: 10] alone" in info["reason"]
    both = "[Bid on Item 0: 10] [Bid on Item 1: 20]"
    assert auction.step({agent: both}).infos[agent] == {"valid": True, "reason": None, "action": both}


def test_speech_is_a_move_on_open_text_ids_and_never_on_listed_ones():
    negotiation = tsmg.make("TextArena/SimpleNegotiation-v0")
    negotiation.reset(seed=0)
    assert negotiation.open_text and negotiation.step({"player_0": "Shall we [Accept] or [Deny]?"}).infos[
        "player_0"
    ] == {"valid": True, "reason": None, "action": "Shall we [Accept] or [Deny]?"}
    assert "Shall we [Accept] or [Deny]?" in negotiation.observe("player_1")
    poker = tsmg.make("TextArena/KuhnPoker-v0")
    poker.reset(seed=0)
    [agent] = poker.active_agents
    assert not poker.open_text and poker.step({agent: "hello"}).infos[agent]["valid"] is False


def test_which_ids_list_their_moves_is_textarenas_behaviour():
    """bench/textarena_fuzz.py --derive, on a few ids of each kind, agrees with LISTED_MOVES."""
    from bench.textarena_fuzz import derive

    verdicts = {env_id: derive(env_id, range(2), 12) for env_id in (
        "2048-v0", "Surround-v0", "KuhnPoker-v0", "Poker-v0", "Battleship-v0-standard", "SimpleNegotiation-v0",
        "Taboo-v0", "MemoryGame-v0",
    )}  # fmt: skip
    assert {env_id: verdict["listed"] for env_id, verdict in verdicts.items()} == {
        env_id: env_id in LISTED_MOVES for env_id in verdicts
    }
    assert verdicts["Poker-v0"]["why"] == "TextArena takes '[Bet 20]', which no message lists"
    assert verdicts["SimpleNegotiation-v0"]["why"].startswith("free speech")


def test_games_json_and_the_catalog_mark_the_open_text_ids(capsys):
    assert main(["games", "--json"]) == 0
    marks = {item["id"]: item.get("open_text") for item in json.loads(capsys.readouterr().out)}
    assert {game_id: marks[game_id] for game_id in TEXTARENA_IDS} == {
        tsmg_id(name): name not in LISTED_MOVES for name, _ in TEXTARENA_GAMES
    }
    assert marks["TextArena/Taboo-v0"] is True and marks["TextArena/2048-v0"] is False
    assert marks["FrozenLake-v0"] is None  # tsmg's own games list their moves through legal_actions
    page = (ROOT / "docs" / "catalog.md").read_text()
    # The description column ends "Moves: open text." (the options column follows it).
    marked = {row.split("`")[1] for row in page.splitlines() if row.startswith("| `") and "Moves: open text. |" in row}
    assert marked == {game_id for game_id in TEXTARENA_IDS if marks[game_id]}


# ------------------------------------------------------------------------------ TextArena's import and refusals
def test_the_first_make_leaves_the_callers_random_state_as_it_was():
    """TextArena's import draws from Python's random (on main the state differed after the first make)."""
    code = (
        "import random, tsmg\n"
        "random.seed(5)\nbefore = random.getstate()\n"
        "tsmg.make('TextArena/KuhnPoker-v0').reset(seed=0)\n"
        "print(random.getstate() == before)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout.strip() == "True", result.stderr[-2000:]


def _nltk_words(folder: Path) -> Path:
    """An NLTK data folder holding the words corpus in NLTK's format (corpora/words/en and en-basic, a word a line).

    The words are the real English ones of TextArena's own US dictionary (NLTK's own list is a download away).
    """
    dictionary = Path(textarena.__file__).parent / "envs" / "utils" / "data" / "en_US.dic"
    entries = {line.split("/")[0].strip() for line in dictionary.read_text().splitlines()[1:]}
    words = sorted(word for word in entries if word.isascii() and word.isalpha())  # NLTK reads the corpus as ASCII
    corpus = folder / "corpora" / "words"
    corpus.mkdir(parents=True)
    (corpus / "en").write_text("\n".join(words) + "\n")
    (corpus / "en-basic").write_text("\n".join(word for word in words if len(word) <= 6) + "\n")
    (corpus / "README").write_text("words\n")
    return folder


def test_word_games_are_refused_by_the_nltk_data_they_lack_and_played_where_it_is_installed(tmp_path):
    """On main Hangman was refused by name whatever was installed; now by what is missing, with the command."""
    code = (
        "import json, tsmg\n"
        "from tsmg.adapters.textarena import refused_games\n"
        "game = tsmg.make('textarena:Hangman-v0'); game.reset(seed=3)\n"
        "info = game.step({'player_0': '[e]'}).infos['player_0']\n"
        "refused = refused_games()\n"
        "print(json.dumps({'info': info, 'hangman': 'textarena:Hangman-v0' in refused,"
        " 'wordle': refused.get('textarena:Wordle-v0')}))\n"
    )
    env = {**os.environ, "NLTK_DATA": str(_nltk_words(tmp_path / "nltk_data")), "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    played = json.loads(result.stdout.splitlines()[-1])
    assert played["info"]["valid"] is True and played["hangman"] is False
    assert played["wordle"].startswith("it reads NLTK's averaged_perceptron_tagger_eng data")  # words are there now
    assert "`python -m nltk.downloader averaged_perceptron_tagger_eng`" in played["wordle"]
    with pytest.raises(UnplayableGameError, match=r"python -m nltk.downloader words`"):  # here: no NLTK data
        tsmg.make("textarena:Hangman-v0")


_PY312_ENV = """
import textarena as ta


class NewSyntaxEnv(ta.Env):
    def reset(self, num_players, seed=None):
        self.state = ta.SinglePlayerState(num_players=num_players, seed=seed)
        board = {"cell": "x"}
        self.state.reset(game_state={}, player_prompt_function=lambda **_: f"Say {board["cell"]}")
"""


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (_PY312_ENV, r"is Python 3\.12 syntax \(f-string: .*\), and this is Python 3\.11: run tsmg on Python 3\.12"),
        ("import tsmg_no_such_package\n", r"needs the Python module tsmg_no_such_package, which is not installed"),
        (
            "import textarena as ta\n\nclass ReadsFileEnv(ta.Env):\n    def reset(self, num_players, seed=None):\n"
            "        open('/nonexistent/tsmg/rules.txt').read()\n\n    def step(self, action):\n        pass\n",
            r"lacks a file it reads \(/nonexistent/tsmg/rules\.txt\)",
        ),
    ],
    ids=["python-3.12-syntax", "missing-module", "missing-file"],
)
def test_an_environment_is_refused_by_what_this_machine_lacks(tmp_path, monkeypatch, source, expected):
    if sys.version_info >= (3, 12) and "3.12" in expected:
        pytest.skip("this Python reads 3.12 syntax")
    name = f"tsmg_probe_{tmp_path.name.replace('-', '_')}"  # a package of its own per case (imports are cached)
    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "env.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    env_id = f"TsmgProbe{tmp_path.name}-v0"
    textarena.register(env_id, entry_point=f"{name}.env:ReadsFileEnv")
    try:
        with pytest.raises(UnplayableGameError, match=expected):
            tsmg.make(f"textarena:{env_id}")
    finally:
        textarena.envs.registration.ENV_REGISTRY.pop(env_id, None)


# ------------------------------------------------------------------------------ success per seat
def test_a_seat_succeeds_when_textarena_rewards_it_highest_and_a_draw_is_no_ones_success():
    """On main every seat of a game of several seats had no success (None), which verifiers counts as 0."""
    poker = tsmg.make("TextArena/KuhnPoker-v0")
    poker.reset(seed=0)
    while not poker.done:
        [agent] = poker.active_agents
        poker.step({agent: poker.legal_actions(agent)[0]})
    returns = poker.episode_returns()
    assert sorted(returns.values()) == [-1.0, 1.0]
    assert {agent: poker.is_success(agent) for agent in poker.agents} == {
        agent: returns[agent] > 0 for agent in poker.agents
    }
    draw = tsmg.make("TextArena/TicTacToe-v0")
    draw.reset(seed=0)
    for cell in (0, 1, 2, 4, 3, 5, 7, 6, 8):  # X O X / X O O / O X X: a full board, no line
        draw.step({draw.active_agents[0]: f"[{cell}]"})
    assert draw.done and draw.episode_returns() == {"player_0": 0.0, "player_1": 0.0}
    assert draw.is_success("player_0") is False and draw.is_success("player_1") is False
    short = tsmg.make("TextArena/KuhnPoker-v0", max_steps=1)  # cut short: TextArena did not finish, no verdict
    short.reset(seed=0)
    [agent] = short.active_agents
    short.step({agent: short.legal_actions(agent)[0]})
    assert short.done and short.is_success(agent) is None
