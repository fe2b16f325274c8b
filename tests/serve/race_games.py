"""A dice race written as docs/define-a-game.md teaches (``RulesGame``), in two builds whose
``has_random_start`` contradicts what their first observation does.

Importing this module registers nothing (the checker tests use the classes);
``tsmg serve --import tests.serve.dice_race`` registers and serves them.
"""

from dataclasses import dataclass

from tsmg import GameConfig, RulesGame
from tsmg.answers import MoveNames

GOAL = 20


@dataclass(frozen=True)
class RaceState:
    position: int
    last_roll: int | None


class DiceRace(RulesGame[RaceState, str]):
    """Roll a die until you pass the goal; the opening roll is thrown at reset (so the start is random)."""

    Config = GameConfig

    def initial_state(self, rng, options):
        roll = int(rng.integers(1, 7))
        return RaceState(position=roll, last_roll=roll)

    def transition(self, state, actions, rng):
        roll = int(rng.integers(1, 7))
        return RaceState(state.position + roll, roll), {"player": 1.0 if state.position + roll >= GOAL else 0.0}

    def is_terminal(self, state):
        return state.position >= GOAL

    def legal_moves(self, state, agent):
        return ["roll"]

    def success(self, state, agent):
        return state.position >= GOAL

    def render(self, state, agent):
        rolled = f"You rolled {state.last_roll}. " if state.last_roll else ""
        return f"{rolled}You are on square {state.position} of {GOAL}. Answer: roll."

    def parse_action(self, agent, text, state):
        return MoveNames({"roll": "roll"}).read(text, "answer roll")

    def action_text(self, agent, action):
        return action

    # has_random_start is left at the default, False: the first observation says otherwise.


class FixedStartRace(DiceRace):
    """Starts on square 0 whatever the seed, yet declares a random start."""

    def initial_state(self, rng, options):
        return RaceState(position=0, last_roll=None)

    @property
    def has_random_start(self):
        return True
