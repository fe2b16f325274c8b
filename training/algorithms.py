"""One listing of every selectable algorithm, for ``tsmg algos --json`` and the docs.

Imports no torch: the loss registry's metadata lives in :mod:`training.loss_specs`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from training.annotators import ANNOTATORS
from training.credit import CREDIT_ASSIGNERS
from training.loss_specs import AGGREGATIONS, LOSSES
from training.sampling import SAMPLERS


def _params(model: type[BaseModel]) -> dict[str, dict[str, Any]]:
    return {
        name: {"default": field.get_default(call_default_factory=True), "description": field.description or ""}
        for name, field in model.model_fields.items()
    }


def list_algorithms() -> dict[str, list[dict[str, Any]]]:
    """Credit assigners, samplers, losses, aggregations and annotators with one-line descriptions (JSON-ready).

    An annotator's description is the first line of its docstring.

    Example:
        >>> sorted(list_algorithms())
        ['aggregations', 'annotators', 'credit_assigners', 'losses', 'samplers']
        >>> [entry["name"] for entry in list_algorithms()["credit_assigners"]][:2]
        ['ms-grpo', 'rloo']
    """
    return {
        "credit_assigners": [
            {
                "name": spec.name,
                "description": spec.description,
                "needs": sorted(spec.needs),
                "params": _params(spec.params),
                "aggregation": spec.aggregation,
            }
            for spec in CREDIT_ASSIGNERS.values()
        ],
        "samplers": [
            {
                "name": spec.name,
                "description": spec.description,
                "options": ["alpha", "importance_correction", "replacement"] if spec.uses_alpha else ["replacement"],
            }
            for spec in SAMPLERS.values()
        ],
        "losses": [
            {
                "name": spec.name,
                "description": spec.description,
                "ratio_level": spec.ratio_level,
                "clip_eps_low": spec.clip_eps_low,
                "clip_eps_high": spec.clip_eps_high,
                "clip_normalization": spec.clip_normalization,
                "aggregation": spec.aggregation,
            }
            for spec in LOSSES.values()
        ],
        "aggregations": [{"name": name, "description": text} for name, text in AGGREGATIONS.items()],
        "annotators": [
            {
                "name": name,
                "description": (annotator.__doc__ or "").strip().splitlines()[0] if annotator.__doc__ else "",
            }
            for name, annotator in ANNOTATORS.items()
        ],
    }
