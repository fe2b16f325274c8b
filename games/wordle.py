"""A Wordle-like single-player text game: find a secret 5-letter word in six guesses.

Rules are in :mod:`games.wordle_rules`. The secret is drawn from the word list with the
episode's generator; every guess must be a word of the list (about 1,600 common English words
shipped as ``games/wordle_words.txt``) and gets one mark per letter: ``G`` right place, ``Y``
elsewhere in the word, ``_`` absent (repeated letters are marked as in Wordle). Solving scores
+1; running out of guesses ends the episode with 0. A word outside the list is an invalid answer
(under ``on_invalid="penalize"`` it does not use up a guess, only a step).

Answers are one word, any case, with surrounding spaces or punctuation.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from pydantic import Field, field_validator

from games import wordle_rules as rules
from tsmg.answers import normalize_answer, quote
from tsmg.core import AgentID, GameConfig, Invalid, RulesGame

_SOLVED = "G" * rules.WORD_LENGTH


class WordleConfig(GameConfig):
    """Options of the Wordle-like game."""

    max_guesses: int = Field(default=6, ge=1, le=20, description="Guesses allowed before the game is lost.")
    words: tuple[str, ...] | None = Field(
        default=None, description="Word list for secrets and guesses (5 letters a-z each); None: the shipped list."
    )

    @field_validator("words")
    @classmethod
    def _check_words(cls, words: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if words is None:
            return None
        cleaned = tuple(sorted({word.strip().lower() for word in words}))
        bad = [word for word in cleaned if len(word) != rules.WORD_LENGTH or not (word.isascii() and word.isalpha())]
        if not cleaned or bad:
            raise ValueError(f"words must be a non-empty list of 5-letter words (a-z); bad: {bad[:5]}")
        return cleaned


@dataclass(frozen=True, slots=True)
class WordleState:
    """The secret word and the (guess, marks) pairs so far."""

    secret: str
    guesses: tuple[tuple[str, str], ...] = ()

    @property
    def solved(self) -> bool:
        """Whether the last guess was the secret."""
        return bool(self.guesses) and self.guesses[-1][1] == _SOLVED


class Wordle(RulesGame[WordleState, str]):
    """Guess the secret 5-letter word; G/Y/_ feedback per letter.

    Example:
        >>> game = Wordle()
        >>> _ = game.reset(seed=0)
        >>> game.parse("player", "xyzzy")
        Invalid(reason="'xyzzy' is not in the word list; guess a common 5-letter English word")
        >>> game.step({"player": "Slate."}).infos["player"]["action"]
        'slate'
    """

    Config = WordleConfig
    config: WordleConfig
    AGENTS = ("player",)

    @cached_property
    def words(self) -> tuple[str, ...]:
        """The word list in use, sorted."""
        return self.config.words if self.config.words is not None else rules.default_words()

    @cached_property
    def _word_set(self) -> frozenset[str]:
        return frozenset(self.words)

    def initial_state(self, rng: np.random.Generator, options: Mapping[str, Any]) -> WordleState:
        """Draw the secret uniformly from the word list."""
        return WordleState(self.words[int(rng.integers(len(self.words)))])

    def transition(
        self, state: WordleState, actions: Mapping[AgentID, str], rng: np.random.Generator
    ) -> tuple[WordleState, Mapping[AgentID, float]]:
        """Score the guess; +1 when it is the secret."""
        guess = actions["player"]
        marks = rules.feedback(guess, state.secret)
        return WordleState(state.secret, state.guesses + ((guess, marks),)), {"player": float(marks == _SOLVED)}

    def is_terminal(self, state: WordleState) -> bool:
        """Solved, or out of guesses."""
        return state.solved or len(state.guesses) >= self.config.max_guesses

    def legal_moves(self, state: WordleState, agent: AgentID) -> Sequence[str]:
        """Every word of the list while the game lasts."""
        return () if self.is_terminal(state) else self.words

    def success(self, state: WordleState, agent: AgentID) -> bool:
        """Success means finding the word."""
        return state.solved

    def oracle(self, state: WordleState, agent: AgentID) -> str | None:
        """Candidate filtering with a letter-coverage pick (see :func:`games.wordle_rules.solver_guess`)."""
        if self.is_terminal(state):
            return None
        return rules.solver_guess(self.words, state.guesses)

    def key(self, state: WordleState, agent: AgentID) -> Hashable:
        """What the player sees: its guesses and their marks."""
        return state.guesses

    # ------------------------------------------------------------------ text layer
    def render(self, state: WordleState, agent: AgentID) -> str:
        """Rules, every guess with its marks, letters known absent, and guesses left (or the result)."""
        limit = self.config.max_guesses
        lines = [
            f"Wordle. Find the secret 5-letter English word in {limit} guesses. Every guess must be a common "
            "5-letter English word from the game's list.",
            "After each guess every letter gets a mark: G = right letter in the right place, Y = the letter is in "
            "the word but in another place, _ = the letter is not in the word (or not that many times).",
        ]
        if state.guesses:
            lines.append("Your guesses:")
            for number, (guess, marks) in enumerate(state.guesses, start=1):
                lines.append(f"  {number}. {' '.join(guess.upper())}  ->  {' '.join(marks)}")
            absent = sorted(_absent_letters(state.guesses))
            if absent and not self.is_terminal(state):
                lines.append(f"Letters not in the word: {' '.join(absent).upper()}.")
        else:
            lines.append("No guesses yet.")
        if state.solved:
            lines.append(f"Solved in {len(state.guesses)} guesses: the word was {state.secret.upper()}.")
        elif self.is_terminal(state):
            lines.append(f"Out of guesses: the word was {state.secret.upper()}.")
        else:
            lines.append(f"Guesses left: {limit - len(state.guesses)}. Answer with one 5-letter word.")
        return "\n".join(lines)

    def parse_action(self, agent: AgentID, text: str, state: WordleState | None) -> str | Invalid:
        """A 5-letter word from the list (any case); checked in O(1) against a set."""
        word = normalize_answer(text)
        if word is None or len(word) != rules.WORD_LENGTH or not (word.isascii() and word.isalpha()):
            return Invalid(f"expected one 5-letter English word (letters a-z); got {quote(text)}")
        if word not in self._word_set:
            return Invalid(f"{word!r} is not in the word list; guess a common 5-letter English word")
        if state is not None and self.is_terminal(state):
            return Invalid("the game is over")
        return word

    def action_text(self, agent: AgentID, action: str) -> str:
        """The word, lower case."""
        return action


def _absent_letters(guesses: Sequence[tuple[str, str]]) -> set[str]:
    """Letters only ever marked ``_`` (never G or Y in any guess)."""
    absent: set[str] = set()
    present: set[str] = set()
    for guess, marks in guesses:
        for letter, mark in zip(guess, marks, strict=True):
            (absent if mark == "_" else present).add(letter)
    return absent - present
