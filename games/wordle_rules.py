"""Wordle rules as pure functions: letter feedback, the word list, and a candidate-filtering solver.

Feedback has one symbol per letter of the guess: ``G`` (right letter, right place), ``Y`` (the
letter is in the word elsewhere) or ``_`` (not in the word). Repeated letters are scored as in
Wordle: greens first, then yellows from left to right while unmatched copies of that letter
remain in the secret, so a letter is never marked more often than the secret holds it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources

WORD_LENGTH = 5
WORD_FILE = "wordle_words.txt"
OPENING = "slate"  # the solver's fixed first guess (when it is in the word list)


@lru_cache(maxsize=1)
def default_words() -> tuple[str, ...]:
    """The shipped list of common 5-letter English words (``games/wordle_words.txt``), sorted."""
    text = resources.files("games").joinpath(WORD_FILE).read_text(encoding="utf-8")
    return tuple(sorted({line.strip().lower() for line in text.splitlines() if line.strip()}))


@lru_cache(maxsize=1 << 16)
def feedback(guess: str, secret: str) -> str:
    """The G/Y/_ pattern for ``guess`` against ``secret`` (same length, lower case).

    Example:
        >>> feedback("babes", "abbey"), feedback("speed", "abide"), feedback("crane", "crane")
        ('YYGG_', '__Y_Y', 'GGGGG')
    """
    unmatched = [s for g, s in zip(guess, secret, strict=True) if g != s]  # secret letters not matched in place
    marks = []
    for g, s in zip(guess, secret, strict=True):
        if g == s:
            marks.append("G")
        elif g in unmatched:
            marks.append("Y")
            unmatched.remove(g)
        else:
            marks.append("_")
    return "".join(marks)


def candidates(words: Sequence[str], history: Sequence[tuple[str, str]]) -> list[str]:
    """The words consistent with every (guess, feedback) pair so far (in the order of ``words``)."""
    if not history:
        return list(words)
    first_guess, first_marks = history[0]
    remaining: Sequence[str] = _consistent(tuple(words), first_guess, first_marks)
    for guess, marks in history[1:]:
        remaining = [word for word in remaining if feedback(guess, word) == marks]
    return list(remaining)


@lru_cache(maxsize=1024)
def _consistent(words: tuple[str, ...], guess: str, marks: str) -> tuple[str, ...]:
    """Words giving ``marks`` for ``guess`` (cached: the solver always opens with the same word)."""
    return tuple(word for word in words if feedback(guess, word) == marks)


def solver_guess(words: Sequence[str], history: Sequence[tuple[str, str]]) -> str:
    """A deterministic guess: filter the candidates, then pick the most informative one.

    The first guess is :data:`OPENING` (if listed). Later guesses are the remaining candidate
    whose distinct letters are most common among the remaining candidates (alphabetical on
    ties). When that guess would leave candidates indistinguishable (e.g. a family of
    ``-atch`` words), a word from the whole list that best covers the letters telling the
    candidates apart is played instead, if it splits them into more feedback groups.
    """
    if not history and OPENING in words:
        return OPENING
    remaining = candidates(words, history)
    if not remaining:
        return words[0]
    if len(remaining) <= 2:
        return remaining[0]
    letters = Counter(letter for word in remaining for letter in set(word))
    # max() keeps the first of equal scores: the alphabetically first, as the lists are sorted.
    best = max(remaining, key=lambda word: sum(letters[c] for c in _letter_set(word)))
    groups = len({feedback(best, word) for word in remaining})
    if groups < len(remaining):
        total = len(remaining)
        split = {letter: min(count, total - count) for letter, count in letters.items()}
        probe = max(words, key=lambda word: sum(split.get(c, 0) for c in _letter_set(word)))
        if len({feedback(probe, word) for word in remaining}) > groups:
            return probe
    return best


@lru_cache(maxsize=1 << 14)
def _letter_set(word: str) -> frozenset[str]:
    return frozenset(word)
