"""What an evaluation run is: games, models, episodes, seed, LAP and game options."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tsmg.lap import LAPConfig
from tsmg.model_spec import DEFAULT_MODEL, parse_model_spec
from tsmg.run_folder import EVAL_CONFIG_FILE


def _is_secret(option: str) -> bool:
    """Options whose values must never be written to disk (API keys, tokens)."""
    lowered = option.lower()
    return any(word in lowered for word in ("key", "token", "secret", "password"))


class ConfigMismatchError(ValueError):
    """An output folder holds a run with a different configuration (never mixed silently)."""


class EvalConfig(BaseModel):
    """The configuration of one evaluation run; stored as ``config.json`` in the run folder.

    Everything that changes what the episodes are is here; how fast they are played
    (concurrency, progress display) is not, so a run can be resumed with other settings.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    games: list[str] = Field(min_length=1, description="Registered game ids.")
    models: list[str] = Field(
        default_factory=lambda: [DEFAULT_MODEL],
        min_length=1,
        description="Model specs: hf:PATH, openai:MODEL, vllm:PATH, smollm2, random, oracle, fixed:TEXT.",
    )
    episodes: int = Field(default=100, ge=1, description="Episodes per game and matchup (one per planned seed).")
    seed: int = Field(default=0, ge=0, description="Base seed of the per-game seed lists and of sampling.")
    game_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Options per game id, passed to tsmg.make."
    )
    lap: LAPConfig = Field(default_factory=LAPConfig, description="Prompting, action format, re-prompts, sampling.")
    model_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Constructor options per model spec (e.g. base_url, dtype)."
    )
    prices: dict[str, tuple[float, float]] = Field(
        default_factory=dict, description="USD per million input and output tokens, per model spec."
    )
    opponent: str | None = Field(
        default=None,
        description=(
            "Model spec holding the other seats of a many-seat game: each model plays every seat in turn against "
            "it (None: the models play each other)."
        ),
    )
    suite: str | None = Field(
        default=None, description="The suite this run plays (tsmg.apps.evaluation.suites), if any."
    )

    @field_validator("models")
    @classmethod
    def _distinct(cls, models: list[str]) -> list[str]:
        if len(set(models)) != len(models):
            raise ValueError(f"models must be distinct, got {models}")
        for model in models:
            parse_model_spec(model)  # an unknown kind fails here, before any folder or model
        return models

    @field_validator("opponent")
    @classmethod
    def _known_opponent(cls, opponent: str | None) -> str | None:
        if opponent is not None:
            parse_model_spec(opponent)
        return opponent

    def to_json(self) -> str:
        """Canonical JSON (sorted keys) used to detect a changed configuration; secrets are redacted."""
        data = self.model_dump(mode="json")
        for key in ("opponent", "suite"):  # absent unless used, so earlier runs' folders still resume
            if data[key] is None:
                del data[key]
        data["model_options"] = {
            model: {key: ("<redacted>" if _is_secret(key) else value) for key, value in options.items()}
            for model, options in data["model_options"].items()
        }
        return json.dumps(data, indent=2, sort_keys=True)

    def check_folder(self, folder: Path, write: bool = True) -> None:
        """Write ``config.json`` in a new folder (unless ``write`` is False), or refuse a folder holding another one.

        Raises:
            ConfigMismatchError: naming the fields that differ.
        """
        path = folder / EVAL_CONFIG_FILE
        if not path.exists():
            if write:
                folder.mkdir(parents=True, exist_ok=True)
                path.write_text(self.to_json() + "\n")
            return
        stored = json.loads(path.read_text())
        current = json.loads(self.to_json())
        changed = sorted(key for key in set(stored) | set(current) if stored.get(key) != current.get(key))
        if changed:
            raise ConfigMismatchError(
                f"{folder} holds a run with a different configuration (changed: {', '.join(changed)}). "
                "Use a new --out folder, or rerun with the original settings to resume it."
            )
