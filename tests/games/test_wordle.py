import pytest

import tsmg
from games import wordle_rules as rules
from games.wordle import Wordle
from tsmg.core import Invalid


@pytest.mark.parametrize(
    ("guess", "secret", "marks"),
    [
        ("babes", "abbey", "YYGG_"),
        ("abbey", "babes", "YYGG_"),
        ("speed", "abide", "__Y_Y"),
        ("eerie", "crane", "__Y_G"),  # one e in the secret: only the green one counts
        ("geese", "eerie", "_GY_G"),  # two green e and one yellow e for the third copy
        ("llama", "hello", "YY___"),
        ("allow", "hello", "_YGY_"),
        ("crane", "crane", "GGGGG"),
        ("zzzzz", "crane", "_____"),
    ],
)
def test_feedback_with_repeated_letters(guess, secret, marks):
    assert rules.feedback(guess, secret) == marks


def test_word_list():
    words = rules.default_words()
    assert len(words) >= 1000
    assert all(len(w) == 5 and w.isascii() and w.isalpha() and w.islower() for w in words)
    assert list(words) == sorted(set(words))
    assert {"crane", "slate", "abbey", "house", "world"} <= set(words)


def test_solver_solves_within_six():
    words = rules.default_words()
    sample = words[::4]
    solved = 0
    for secret in sample:
        history = []
        for _ in range(6):
            guess = rules.solver_guess(words, history)
            history.append((guess, rules.feedback(guess, secret)))
            if guess == secret:
                solved += 1
                break
    assert solved >= 0.9 * len(sample)


def test_episode_rewards_and_text():
    game = Wordle()
    observations, _ = game.reset(seed=5)
    assert "Guesses left: 6" in observations["player"]
    secret = game.state.secret
    wrong = next(w for w in game.words if rules.feedback(w, secret).count("G") == 0)
    result = game.step({"player": wrong.upper()})
    assert result.rewards == {"player": 0.0} and "1. " + " ".join(wrong.upper()) in result.observations["player"]
    result = game.step({"player": f"  {secret}! "})
    assert result.rewards == {"player": 1.0} and result.done and game.is_success("player")
    assert f"the word was {secret.upper()}" in result.observations["player"]


def test_out_of_guesses():
    game = Wordle(max_guesses=2, words=("crane", "slate", "house"))
    game.reset(seed=0)
    wrong = [w for w in game.words if w != game.state.secret]
    game.step({"player": wrong[0]})
    result = game.step({"player": wrong[1]})
    assert result.done and result.rewards == {"player": 0.0} and not game.is_success("player")
    assert "Out of guesses" in result.observations["player"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "5-letter"),
        ("four", "5-letter"),
        ("sixsix", "5-letter"),
        ("qwxyz", "not in the word list"),
        ("crâne", "5-letter"),
        ("cr ne", "5-letter"),
        ("ＣＲＡＮＥ", "5-letter"),
        ("a" * 10_000, "5-letter"),
    ],
)
def test_parse_rejects(text, reason):
    parsed = Wordle().parse("player", text)
    assert isinstance(parsed, Invalid) and reason in parsed.reason


def test_same_seed_same_secret_and_solver_episode():
    game = tsmg.make("Wordle-v0")
    secrets = set()
    for seed in range(20):
        game.reset(seed=seed)
        secrets.add(game.state.secret)
        game.reset(seed=seed)
        assert game.state.secret in secrets
    assert len(secrets) > 15
    game.reset(seed=7)
    while not game.done:
        game.step({"player": game.oracle_action("player")})
    assert game.is_success("player")


def test_custom_word_list_is_validated():
    with pytest.raises(tsmg.GameOptionsError):
        tsmg.make("Wordle-v0", words=("toolong",))
