"""OpenEnv's client, typed for served tsmg games.

>>> from tsmg.apps.serve.client import GameEnvClient                  # doctest: +SKIP
>>> with GameEnvClient(base_url="http://127.0.0.1:8000/FrozenLake-v0").sync() as env:  # doctest: +SKIP
...     result = env.reset(seed=0)
...     result = env.step(GameAction(text="right"))

Each client is one session (one WebSocket); ``reset`` takes the fields of
:meth:`tsmg.apps.serve.environment.GameEnvironment.reset` (``seed``, ``agent``, ``opponent``, …).
A server started with ``--token`` needs ``GameEnvClient(base_url=..., token=...)`` (or
``TSMG_SERVE_TOKEN`` set).
"""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from tsmg.apps.serve.auth import client_token, token_headers
from tsmg.apps.serve.models import GameAction, GameObservation, GameState


class GameEnvClient(EnvClient[GameAction, GameObservation, GameState]):
    """An OpenEnv ``EnvClient`` whose actions and observations are tsmg's typed models."""

    def __init__(self, *args: Any, token: str | None = None, **kwargs: Any) -> None:
        """OpenEnv's ``EnvClient`` arguments, plus the server's ``token`` (default: ``$TSMG_SERVE_TOKEN``)."""
        headers = {**token_headers(client_token(token)), **(kwargs.pop("headers", None) or {})}
        super().__init__(*args, headers=headers or None, **kwargs)

    def _step_payload(self, action: GameAction) -> dict[str, Any]:
        return action.model_dump(exclude_defaults=True)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[GameObservation]:
        fields = dict(payload.get("observation", {}))
        fields["reward"] = payload.get("reward")
        fields["done"] = payload.get("done", False)
        observation = GameObservation.model_validate(fields)
        return StepResult(observation=observation, reward=observation.reward, done=observation.done)

    def _parse_state(self, payload: dict[str, Any]) -> GameState:
        return GameState.model_validate(payload)
