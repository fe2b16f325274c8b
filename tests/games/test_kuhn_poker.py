import itertools
from fractions import Fraction

import numpy as np
import pytest

import tsmg
from games import kuhn_poker_rules as rules
from games.kuhn_poker import KuhnPoker, KuhnPokerState
from tsmg.core import Invalid

DEALS = [(a, b) for a in range(3) for b in range(3) if a != b]
ACTIONS = {"k": rules.CHECK, "b": rules.BET, "c": rules.CALL, "f": rules.FOLD}


def _expected_payoff(cards, history):
    """Hand-written payoff table for player 0."""
    high = 1 if cards[0] > cards[1] else -1
    return {"kk": high, "bc": 2 * high, "kbc": 2 * high, "bf": 1, "kbf": -1}[history]


@pytest.mark.parametrize("cards", DEALS)
@pytest.mark.parametrize("history", sorted(rules.TERMINAL_HISTORIES))
def test_payoffs_for_every_deal_and_sequence(cards, history):
    first, second = rules.payoffs(cards, history)
    assert first == _expected_payoff(cards, history) and first + second == 0
    # The same hand played through the game gives the same rewards to both players.
    game = KuhnPoker()
    game.reset(seed=0, options={"cards": cards})
    total = {"player_0": 0.0, "player_1": 0.0}
    for letter in history:
        agent = game.active_agents[0]
        result = game.step({agent: rules.ACTION_NAMES[ACTIONS[letter]]})
        for name, reward in result.rewards.items():
            total[name] += reward
    assert result.done and total == {"player_0": float(first), "player_1": float(second)}


def test_legal_actions_and_turns():
    assert rules.legal_actions("") == (rules.CHECK, rules.BET)
    assert rules.legal_actions("b") == (rules.CALL, rules.FOLD)
    assert rules.legal_actions("kb") == (rules.CALL, rules.FOLD)
    assert rules.legal_actions("kk") == ()
    assert [rules.player_to_act(h) for h in ("", "k", "b", "kb", "bc")] == [0, 1, 1, 0, None]
    with pytest.raises(ValueError):
        rules.play("b", rules.CHECK)


def test_deal_is_seeded_and_hidden():
    game = KuhnPoker()
    deals = set()
    for seed in range(30):
        observations, _ = game.reset(seed=seed)
        cards = game.state.cards
        deals.add(cards)
        assert f"Your card: {rules.CARD_NAMES[cards[0]]}." in observations["player_0"]
        assert f"Your card: {rules.CARD_NAMES[cards[1]]}." in observations["player_1"]
        assert game.state_key("player_0")[2] is None  # the other card is unknown before a showdown
        again, _ = game.reset(seed=seed)
        assert again == observations
    assert deals == set(DEALS)


def test_parse_uses_the_state():
    game = KuhnPoker()
    assert game.parse("player_0", "CHECK") == rules.CHECK  # no episode: form only
    assert isinstance(game.parse("player_0", "pass"), Invalid)  # an unannounced synonym
    game.reset(seed=0)
    assert game.parse("player_0", "Bet.") == rules.BET
    assert isinstance(game.parse("player_0", "raise"), Invalid)
    parsed = game.parse("player_0", "fold")
    assert isinstance(parsed, Invalid) and "check or bet" in parsed.reason
    game.step({"player_0": "bet"})
    assert game.parse("player_1", "Fold") == rules.FOLD
    assert isinstance(game.parse("player_0", "call"), Invalid)  # not player_0's turn
    assert isinstance(game.parse("player_1", "all in"), Invalid)


def _strategy_value(strategy_0, strategy_1):
    """Exact expected payoff of player 0 (averaged over deals) for two behaviour strategies."""
    total = Fraction(0)
    for cards in DEALS:

        def walk(history, probability, cards=cards):
            if rules.is_terminal(history):
                return probability * rules.payoffs(cards, history)[0]
            seat = rules.player_to_act(history)
            strategy = strategy_0 if seat == 0 else strategy_1
            aggressive = strategy(cards[seat], history)
            passive_action, active_action = (
                (rules.FOLD, rules.CALL) if rules.facing_bet(history) else (rules.CHECK, rules.BET)
            )
            value = Fraction(0)
            if aggressive:
                value += walk(rules.play(history, active_action), probability * aggressive, cards)
            if aggressive != 1:
                value += walk(rules.play(history, passive_action), probability * (1 - aggressive), cards)
            return value

        total += walk("", Fraction(1, 6))
    return total


def _nash(alpha):
    return lambda card, history: Fraction(rules.nash_aggression(card, history, alpha)).limit_denominator(1000)


def _pure_strategies(histories):
    for choice in itertools.product((0, 1), repeat=3 * len(histories)):
        table = {(card, h): choice[3 * i + card] for i, h in enumerate(histories) for card in range(3)}
        yield lambda card, history, table=table: Fraction(table[(card, history)])


@pytest.mark.parametrize("alpha", [0.0, 1 / 6, 1 / 3])
def test_nash_strategy_value_and_no_profitable_deviation(alpha):
    value = _strategy_value(_nash(alpha), _nash(alpha))
    assert value == Fraction(-1, 18)
    # No pure strategy of either player does better against the equilibrium.
    assert max(_strategy_value(s, _nash(alpha)) for s in _pure_strategies(["", "kb"])) <= Fraction(-1, 18)
    assert min(_strategy_value(_nash(alpha), s) for s in _pure_strategies(["b", "k"])) >= Fraction(-1, 18)


def test_oracle_is_a_function_of_the_state_and_randomised_across_deals():
    game = KuhnPoker()
    bets = 0
    trials = 600
    for seed in range(trials):
        state = KuhnPokerState((rules.QUEEN, rules.JACK), "k", deal_seed=seed)
        action = game.oracle(state, "player_1")
        assert game.oracle(state, "player_1") == action
        bets += action == rules.BET
    assert abs(bets / trials - 1 / 3) < 0.06  # player 1 bluffs a J after a check with probability 1/3


def test_vs_nash_break_even_on_average():
    game = tsmg.make("KuhnPoker-vsNash-v0")
    returns = []
    for seed in range(400):
        game.reset(seed=seed)
        while not game.done:
            game.step({"player": game.oracle_action("player")})
        returns.append(game.episode_returns()["player"])
    assert abs(np.mean(returns)) < 0.25


#: The observation lines bench/selfplay.py and the configs kept before the compact view was a game option.
KUHN_LINES = r"(You are player_\d\. Your card: [JQK]\.)|(Betting so far: .*)|(No actions yet\.)"


def test_the_compact_view_shows_the_seat_the_card_and_the_betting():
    game = tsmg.make("KuhnPoker-v0", view="compact")
    observations, _ = game.reset(seed=0, options={"cards": (0, 1)})
    assert observations["player_0"] == "You are player_0. Your card: J.\nNo actions yet."
    observations = game.step({"player_0": "bet"}).observations
    assert observations["player_1"] == "You are player_1. Your card: Q.\nBetting so far: player_0 bet 1 chip."
    observations = game.step({"player_1": "call"}).observations
    assert observations["player_0"] == (
        "You are player_0. Your card: J.\nBetting so far: you bet 1 chip, player_1 called.\n"
        "Hand over. Showdown: your J against Q; you lose 2 chips."
    )
    assert tsmg.make("KuhnPoker-v0").reset(seed=0)[0]["player_0"].startswith("Kuhn poker.")  # full is the default
    single = tsmg.make("KuhnPoker-vsNash-v0", view="compact", learner_seat="player_0")
    assert (
        single.reset(seed=0, options={"cards": (2, 0)})[0]["player"]
        == "You are player_0. Your card: K.\nNo actions yet."
    )
    with pytest.raises(ValueError, match="view"):
        tsmg.make("KuhnPoker-v0", view="short")


@pytest.mark.parametrize("cards", DEALS)
def test_the_compact_view_is_the_observation_lines_the_bench_kept_at_every_decision(cards):
    from tsmg.policies import compact_observation

    for history in rules.DECISION_HISTORIES:
        full, compact = tsmg.make("KuhnPoker-v0"), tsmg.make("KuhnPoker-v0", view="compact")
        for game in (full, compact):
            game.reset(seed=0, options={"cards": cards})
            for letter in history:
                game.step({game.active_agents[0]: rules.ACTION_NAMES[rules.ACTION_LETTERS.index(letter)]})
        agent = full.active_agents[0]
        assert compact.observe(agent) == compact_observation(full.observe(agent), KUHN_LINES)
