"""Constrained choice: a token-prefix trie over the tokenised choices.

When a request lists ``choices``, each choice is tokenised on its own and the tokens form a trie.
At every step only the children of the current node may be written; when a node completes a
choice and has no children the completion ends there, and when it completes a choice that is
also the prefix of a longer one (``"up"`` and ``"upper"``) the end-of-sequence token is allowed
as the way to stop. The sampled text is therefore always exactly one of the choices.

Only the canonical tokenisation of each choice is allowed; another tokenisation of the same
string (e.g. ``"le" + "ft"`` where the tokenizer writes ``"left"``) is masked out.

Example:
    >>> trie = ChoiceTrie([[5, 6], [5, 7], [9]], ["left", "leap", "up"], end_token=0)
    >>> trie.allowed(trie.ROOT)
    [5, 9]
    >>> node = trie.advance(trie.ROOT, 5)
    >>> trie.allowed(node), trie.finished(node)
    ([6, 7], False)
    >>> node = trie.advance(node, 7)
    >>> trie.finished(node), trie.choice_at(node)
    (True, 'leap')
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any


class ChoiceTrie:
    """A trie over token sequences, one per choice, with the end token allowed after a complete prefix choice.

    Args:
        sequences: Token ids of each choice.
        texts: The choice strings, parallel to ``sequences`` (returned by :meth:`choice_at`).
        end_token: Token that ends a choice which is also a prefix of a longer one (the EOS
            token); None stops at the first complete choice instead.

    Raises:
        ValueError: when there are no choices or their counts differ.
    """

    ROOT = 0

    max_tokens: int
    """Most tokens a completion can take."""

    def __init__(self, sequences: Sequence[Sequence[int]], texts: Sequence[str], end_token: int | None) -> None:
        if not sequences:
            raise ValueError("constrained choice needs at least one choice")
        if len(sequences) != len(texts):
            raise ValueError("one token sequence per choice text")
        self.end_token = end_token
        self._children: list[dict[int, int]] = [{}]
        self._choice: list[str | None] = [None]
        for tokens, text in zip(sequences, texts, strict=True):
            node = self.ROOT
            for token in tokens:
                child = self._children[node].get(token)
                if child is None:
                    child = len(self._children)
                    self._children.append({})
                    self._choice.append(None)
                    self._children[node][token] = child
                node = child
            if self._choice[node] is None:  # the first of duplicate choices wins
                self._choice[node] = text
        self._ended: dict[int, int] = {}  # node -> the node reached by writing end_token there
        # A choice that is a prefix of a longer one ends with the end token, so it never takes
        # more tokens than the longest choice; an empty choice takes one (the end token).
        self.max_tokens = max(1, max(len(tokens) for tokens in sequences))

    def allowed(self, node: int) -> list[int]:
        """Tokens that may be written at ``node``."""
        tokens = list(self._children[node])
        if self._choice[node] is not None and self.end_token is not None and self.end_token not in tokens:
            tokens.append(self.end_token)
        return tokens

    def advance(self, node: int, token: int) -> int:
        """The node after writing ``token`` at ``node``.

        Raises:
            KeyError: when ``token`` is not allowed at ``node``.
        """
        child = self._children[node].get(token)
        if child is not None:
            return child
        if token == self.end_token and self._choice[node] is not None:
            ended = self._ended.get(node)
            if ended is None:
                ended = len(self._children)
                self._children.append({})
                self._choice.append(self._choice[node])
                self._ended[node] = ended
            return ended
        raise KeyError(f"token {token} is not allowed here")

    def finished(self, node: int) -> bool:
        """Whether a choice is complete at ``node`` and nothing more may be written."""
        if self._choice[node] is None:
            return False
        return not self._children[node] or self.end_token is None

    def choice_at(self, node: int) -> str | None:
        """The choice completed at ``node`` (None inside a choice)."""
        return self._choice[node]


class ChoiceTries:
    """The tries of the choice lists a tokenizer has seen: built once per list, the least recently used dropped.

    Generation (:class:`backends.hf.HFBackend`) and scoring (:class:`backends.scoring.ChoiceMasks`)
    take their tries from here, so a trainer recomputes a constrained answer's probability over
    exactly the trie it was sampled from.

    Args:
        tokenizer: Tokenises each choice on its own, without special tokens.
        end_token: The token that ends a choice which is also a prefix of a longer one (EOS).
        size: Most tries kept (choice lists may vary per state).

    Raises:
        ValueError: :meth:`get` of an empty choice list.
    """

    def __init__(self, tokenizer: Any, end_token: int | None, size: int = 256) -> None:
        self.tokenizer = tokenizer
        self.end_token = end_token
        self.size = size
        self._tries: OrderedDict[tuple[str, ...], ChoiceTrie] = OrderedDict()

    def get(self, choices: Sequence[str]) -> ChoiceTrie:
        """The trie of ``choices``."""
        key = tuple(choices)
        trie = self._tries.get(key)
        if trie is not None:
            self._tries.move_to_end(key)
            return trie
        if not key:
            raise ValueError("choices is empty: give at least one allowed answer")
        encoded = self.tokenizer(list(key), add_special_tokens=False)["input_ids"]
        trie = self._tries[key] = ChoiceTrie(encoded, list(key), end_token=self.end_token)
        if len(self._tries) > self.size:
            self._tries.popitem(last=False)
        return trie
