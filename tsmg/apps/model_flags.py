"""``--model-option MODEL:KEY=VALUE`` and ``--price MODEL=IN,OUT``: read, and checked against the run's models.

Both flags name a model of the run. One that names another model (a typo such as ``randm``, or a
model left out of ``--model``) would change nothing, silently, so it is refused with the run's
models listed; so is an option the named model does not take (``hf:X:thread=1``), with the ones
it does. Both are checked when the command line is read: before any folder is written and
before any model loads, ``--dry-run`` included.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tsmg.apps.cli_parser import UsageError
from tsmg.assignments import parse_model_option
from tsmg.model_spec import parse_model_spec

#: Scripted kinds that take no model option at all.
_NO_OPTIONS = ("random", "oracle", "fixed")


def model_options_from_flags(texts: Iterable[str], models: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``--model-option`` values as ``{model: {key: value}}``, each naming one of ``models`` and an option it takes.

    Raises:
        UsageError: A malformed value, a model not in the run, or an option the model does not take.

    Example:
        >>> model_options_from_flags(["openai:m:base_url=http://127.0.0.1:8000/v1"], ["openai:m"])
        {'openai:m': {'base_url': 'http://127.0.0.1:8000/v1'}}
        >>> model_options_from_flags(["randm:threads=1"], ["random", "smollm2"])
        Traceback (most recent call last):
        ...
        tsmg.apps.cli_parser.UsageError: --model-option randm:threads=1 names randm, which is not in this run: \
its models are random, smollm2
    """
    options: dict[str, dict[str, Any]] = {}
    for text in texts:
        try:
            model, key, value = parse_model_option(text)
        except ValueError as error:
            raise UsageError(str(error)) from None
        _check_in_run("--model-option", text, model, models)
        known = option_names(model)
        if known is not None and key not in known:
            takes = f"its options are {', '.join(known)}" if known else "it takes none"
            raise UsageError(f"--model-option {text}: {model} has no option {key!r}; {takes}")
        options.setdefault(model, {})[key] = value
    return options


def prices_from_flags(texts: Iterable[str], models: Sequence[str]) -> dict[str, tuple[float, float]]:
    """``--price`` values as ``{model: (IN, OUT)}`` in USD per million tokens, each naming one of ``models``.

    Raises:
        UsageError: Not ``MODEL=IN,OUT`` with two numbers, or a model not in the run.

    Example:
        >>> prices_from_flags(["openai:m=0.15,0.6"], ["openai:m"])
        {'openai:m': (0.15, 0.6)}
    """
    prices: dict[str, tuple[float, float]] = {}
    for text in texts:
        model, _, numbers = text.rpartition("=")
        price_in, _, price_out = numbers.partition(",")
        try:
            price = float(price_in), float(price_out)
        except ValueError:
            raise UsageError(
                f"--price must be MODEL=IN,OUT with two numbers (USD per 1M tokens), got {text!r}"
            ) from None
        _check_in_run("--price", text, model, models)
        prices[model] = price
    return prices


def option_names(spec: str) -> tuple[str, ...] | None:
    """The model options ``spec`` takes (empty: none); None where they cannot be listed (vLLM's engine, a plugin)."""
    kind = parse_model_spec(spec).kind
    if kind in _NO_OPTIONS:
        return ()
    if kind in ("hf", "smollm2", "openai", "vllm"):
        from backends import model_option_names

        return model_option_names(spec)
    if kind == "openspiel-mcts":
        return ("rollouts", "simulations", "uct_c")  # MCTSPolicy.DEFAULTS, which needs pyspiel to import
    if kind == "openspiel-br":
        return ("against",)  # BestResponsePolicy.DEFAULTS
    return None


def _check_in_run(flag: str, text: str, model: str, models: Sequence[str]) -> None:
    """Refuse ``flag``'s value ``text`` when ``model`` is not one of the run's ``models``."""
    if model not in models:
        raise UsageError(f"{flag} {text} names {model}, which is not in this run: its models are {', '.join(models)}")
