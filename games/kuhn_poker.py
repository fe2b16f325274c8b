"""Kuhn poker as a two-player text game with hidden cards, and a single-agent variant.

Rules are in :mod:`games.kuhn_poker_rules`. The deal is the chance step, drawn from the
episode's generator in ``initial_state``; each player's observation shows only its own card
(the other card appears only at a showdown). Rewards are the net chips won when the hand ends.

Answers are ``check``, ``bet``, ``call`` or ``fold`` (any case, surrounding punctuation
aside); the observation lists the ones legal now.

The oracle plays the Nash equilibrium with parameter ``oracle_alpha``. Its random choices are
made with a generator seeded from ``deal_seed``, a number drawn with the deal and kept in the
state, and from the betting history, so the oracle is a function of the state: the same seed
gives the same choices, and different seeds different ones.

:class:`KuhnPoker` measures a policy's exact exploitability (``exploitability(policy)``, the
capability :class:`tsmg.exploitability.HasExploitability`; :mod:`games.kuhn_poker_exploitability`
solves the 12 information sets), and that of the average of several (``average_exploitability``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import Field

from games import kuhn_poker_rules as rules
from games.opponents import OpponentConfig, VsFixedOpponent
from games.views import ViewConfig
from tsmg.answers import MoveNames
from tsmg.core import AgentID, Invalid, RulesGame

if TYPE_CHECKING:
    from tsmg.exploitability import ExploitabilityReport
    from tsmg.policies import Policy

_ACTIONS = MoveNames.indexed(rules.ACTION_NAMES)
_DONE_TEXT = {"k": "checked", "b": "bet 1 chip", "c": "called", "f": "folded"}


class KuhnPokerConfig(ViewConfig):
    """Options of Kuhn poker."""

    oracle_alpha: float = Field(
        default=1 / 6, ge=0.0, le=1 / 3, description="Parameter alpha (0..1/3) of the Nash strategy the oracle plays."
    )


@dataclass(frozen=True, slots=True)
class KuhnPokerState:
    """The dealt cards (player 0's first), the betting history, and the oracle's seed."""

    cards: rules.Cards
    history: str = ""
    deal_seed: int = 0


class KuhnPoker(RulesGame[KuhnPokerState, int]):
    """Kuhn poker for two players; an action is 0..3 (check, bet, call, fold).

    Example:
        >>> game = KuhnPoker()
        >>> _ = game.reset(seed=0)
        >>> game.legal_actions("player_0")
        ['check', 'bet']
        >>> game.parse("player_0", "call")
        Invalid(reason='you cannot call: no bet is pending; answer check or bet')
    """

    Config = KuhnPokerConfig
    outcome = "win_draw_loss"  # by chips won: a hand always has a winner
    config: KuhnPokerConfig
    AGENTS = ("player_0", "player_1")

    def initial_state(self, rng: np.random.Generator, options: Mapping[str, Any]) -> KuhnPokerState:
        """Deal two cards (and draw the seed of the oracle's choices).

        ``options={"cards": (c0, c1)}`` fixes the deal (0 = J, 1 = Q, 2 = K), e.g. to evaluate
        every deal in turn.
        """
        cards = rules.deal(rng)
        if "cards" in options:
            cards = _checked_cards(options["cards"])
        return KuhnPokerState(cards, "", int(rng.integers(2**31)))

    def transition(
        self, state: KuhnPokerState, actions: Mapping[AgentID, int], rng: np.random.Generator
    ) -> tuple[KuhnPokerState, Mapping[AgentID, float]]:
        """Add the action to the history; pay out the net chips when the hand ends."""
        seat = rules.player_to_act(state.history)
        assert seat is not None, "no action is possible in a finished hand"
        history = rules.play(state.history, actions[self.AGENTS[seat]])
        next_state = KuhnPokerState(state.cards, history, state.deal_seed)
        if not rules.is_terminal(history):
            return next_state, {}
        first, second = rules.payoffs(state.cards, history)
        return next_state, {self.AGENTS[0]: float(first), self.AGENTS[1]: float(second)}

    def is_terminal(self, state: KuhnPokerState) -> bool:
        """The hand ended by a fold or a showdown."""
        return rules.is_terminal(state.history)

    def current_agents(self, state: KuhnPokerState) -> tuple[AgentID, ...]:
        """The player to act (none once the hand ended)."""
        seat = rules.player_to_act(state.history)
        return () if seat is None else (self.AGENTS[seat],)

    def legal_moves(self, state: KuhnPokerState, agent: AgentID) -> Sequence[int]:
        """Check/bet, or call/fold facing a bet; for the player to act only."""
        return rules.legal_actions(state.history) if agent in self.current_agents(state) else ()

    def success(self, state: KuhnPokerState, agent: AgentID) -> bool | None:
        """Success means winning chips in the hand (None while it lasts)."""
        if not rules.is_terminal(state.history):
            return None
        return rules.payoffs(state.cards, state.history)[self.AGENTS.index(agent)] > 0

    def oracle(self, state: KuhnPokerState, agent: AgentID) -> int | None:
        """The Nash strategy with ``oracle_alpha``, randomised by a generator derived from the state."""
        if agent not in self.current_agents(state):
            return None
        uniform = float(np.random.default_rng([state.deal_seed, len(state.history)]).random())
        card = state.cards[self.AGENTS.index(agent)]
        return rules.nash_action(card, state.history, self.config.oracle_alpha, uniform)

    def key(self, state: KuhnPokerState, agent: AgentID) -> Hashable:
        """What ``agent`` knows: its own card and the history (plus the other card after a showdown)."""
        seat = self.AGENTS.index(agent)
        shown = _showdown(state.history)
        return (state.cards[seat], state.history, state.cards[1 - seat] if shown else None)

    @property
    def has_random_start(self) -> bool:
        """The deal depends on the seed."""
        return True

    # ------------------------------------------------------------------ text layer
    def render(self, state: KuhnPokerState, agent: AgentID) -> str:
        """Rules, own card, the betting so far, the pot, and what to answer (or the result).

        With ``view="compact"``: the seat and card line and the betting line alone (plus the
        result once the hand is over), e.g. ``You are player_1. Your card: Q.`` then
        ``Betting so far: player_0 bet 1 chip.``; the legal answers are the choices.
        """
        seat = self.AGENTS.index(agent)
        other = self.AGENTS[1 - seat]
        chips = rules.contributions(state.history)
        lines = [
            "Kuhn poker. The deck has three cards: J < Q < K. Each player antes 1 chip and gets one card; "
            "the third card stays hidden.",
            f"{self.AGENTS[0]} acts first. With no bet pending a player may check or bet 1 chip; facing a bet, "
            "call (put in 1 chip) or fold (give up the pot). If nobody folds, the higher card wins the pot.",
            f"You are {agent}. Your card: {rules.CARD_NAMES[state.cards[seat]]}.",
        ]
        compact = self.config.view == "compact"
        if compact:
            del lines[:2]
        if state.history:
            actions = ", ".join(
                f"{'you' if index % 2 == seat else other} {_DONE_TEXT[letter]}"
                for index, letter in enumerate(state.history)
            )
            lines.append(f"Betting so far: {actions}.")
        else:
            lines.append("No actions yet.")
        if not compact:
            lines.append(f"Pot: {sum(chips)} chips (you have put in {chips[seat]}).")
        if rules.is_terminal(state.history):
            won = rules.payoffs(state.cards, state.history)[seat]
            result = f"you win {_chips(won)}" if won > 0 else f"you lose {_chips(-won)}"
            if _showdown(state.history):
                shown = rules.CARD_NAMES[state.cards[1 - seat]]
                lines.append(
                    f"Hand over. Showdown: your {rules.CARD_NAMES[state.cards[seat]]} against {shown}; {result}."
                )
            else:
                folder = "You" if (len(state.history) - 1) % 2 == seat else other
                lines.append(f"Hand over. {folder} folded; {result}.")
        elif compact:  # the betting says whose turn it is; the choices are the legal answers
            pass
        elif rules.player_to_act(state.history) == seat:
            options = " or ".join(rules.ACTION_NAMES[a] for a in rules.legal_actions(state.history))
            lines.append(f"Your turn: answer {options}.")
        else:
            lines.append(f"It is the turn of {other}; wait for your turn.")
        return "\n".join(lines)

    def parse_action(self, agent: AgentID, text: str, state: KuhnPokerState | None) -> int | Invalid:
        """check, bet, call or fold, legal for ``agent`` in ``state``."""
        action = _ACTIONS.read(text)
        if isinstance(action, Invalid):
            return action
        if state is not None:
            if rules.is_terminal(state.history):
                return Invalid("the hand is over")
            if agent not in self.current_agents(state):
                return Invalid(f"it is not {agent}'s turn")
            legal = rules.legal_actions(state.history)
            if action not in legal:
                situation = "you face a bet" if rules.facing_bet(state.history) else "no bet is pending"
                options = " or ".join(rules.ACTION_NAMES[a] for a in legal)
                return Invalid(f"you cannot {rules.ACTION_NAMES[action]}: {situation}; answer {options}")
        return action

    def action_text(self, agent: AgentID, action: int) -> str:
        """The action's name."""
        return rules.ACTION_NAMES[action]

    def exploitability(self, policy: Policy) -> ExploitabilityReport:
        """The exact exploitability of ``policy`` in this game (:mod:`games.kuhn_poker_exploitability`).

        The game is Kuhn poker as these options show it: the policy is asked at every information
        set in games built as this one was.

        Raises:
            ValueError: The policy's probabilities cannot be read (only a LAP with constrained
                choice over a local model, the random policy and the oracle), or its prompt at an
                information set depends on the other seat's card.
        """
        from games.kuhn_poker_exploitability import strategy_of, strategy_report
        from tsmg.strategy import policy_temperature

        return strategy_report(strategy_of(self, policy), policy_temperature(policy))

    def average_exploitability(self, reports: Sequence[ExploitabilityReport]) -> ExploitabilityReport:
        """The exploitability of the average of the measured policies, one drawn per hand (``--average``)."""
        from games.kuhn_poker_exploitability import average_report

        return average_report(reports)


def _checked_cards(cards: Any) -> rules.Cards:
    first, second = (int(card) for card in cards)
    if first == second or not {first, second} <= {0, 1, 2}:
        raise ValueError(f"cards must be two different cards among 0 (J), 1 (Q), 2 (K); got {cards!r}")
    return first, second


def _chips(count: int) -> str:
    return f"{count} chip" if count == 1 else f"{count} chips"


def _showdown(history: str) -> bool:
    return rules.is_terminal(history) and not history.endswith("f")


class KuhnPokerVsConfig(KuhnPokerConfig, OpponentConfig):
    """Options of Kuhn poker against a fixed opponent."""


class KuhnPokerVsNash(VsFixedOpponent[KuhnPokerState, int]):
    """Kuhn poker for one agent against the Nash strategy (the best it can do is break even on average).

    The game value is -1/18 chip per hand for player_0 and +1/18 for player_1, so a learner
    seated at random can expect at most 0 per hand against the equilibrium, and loses by
    deviating from it in exploitable ways (e.g. always bluffing with the J).

    Example:
        >>> game = KuhnPokerVsNash(learner_seat="player_0")
        >>> _ = game.reset(seed=0)
        >>> game.legal_actions("player")
        ['check', 'bet']
    """

    Inner = KuhnPoker
    OPPONENT = "a Nash-equilibrium strategy"
    Config = KuhnPokerVsConfig
    config: KuhnPokerVsConfig
