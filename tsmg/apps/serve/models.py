"""The typed messages of a served game: what a client sends, what it gets back.

They extend OpenEnv's ``Action``, ``Observation`` and ``State`` models, so ``/schema`` publishes
them and any OpenEnv client can validate against them. One session plays one seat of a game
(the other seats are played by a server-side policy) or every seat at once (what
:class:`tsmg.apps.remote.RemoteGame` does, so a remote game is a whole :class:`tsmg.core.Game`).
"""

from __future__ import annotations

from typing import Any, Literal

from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, ConfigDict, Field, field_validator


def _valid_unicode(text: str) -> str:
    """Refuse text that cannot be sent back as UTF-8 (a lone surrogate, sent as a JSON escape)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text is not valid Unicode (it holds a lone surrogate)") from None
    return text


class GameAction(Action):
    """One message of a session to its game: answers to play, or a question about an answer.

    A session that plays one seat sends ``text``. A session that plays every seat sends ``text``
    for the one seat to move, or ``answers`` when several seats move at once (simultaneous games).
    ``invalid`` marks answers the client already knows are unusable (a model wrote no action
    tag): the game applies its ``on_invalid`` rule with that reason, as in-process.
    """

    text: str | None = Field(default=None, description="The answer of `agent` (or of the one seat to move).")
    agent: str | None = Field(default=None, description="The seat answering (default: the seat to move).")
    answers: dict[str, str] | None = Field(default=None, description="One answer per seat, for several at once.")
    invalid: dict[str, str] | None = Field(
        default=None, description="Seats whose answer is known to be unusable, with the reason."
    )
    query: Literal["parse", "oracle"] | None = Field(
        default=None,
        description=(
            "Ask instead of play: 'parse' says whether `text` is a valid answer of `agent` and what it "
            "means; 'oracle' gives the game's oracle move for `agent`. Neither changes the episode."
        ),
    )

    @field_validator("text", "agent")
    @classmethod
    def _text_is_unicode(cls, value: str | None) -> str | None:
        return None if value is None else _valid_unicode(value)

    @field_validator("answers", "invalid")
    @classmethod
    def _answers_are_unicode(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None:
            for agent, text in value.items():
                _valid_unicode(agent)
                _valid_unicode(text)
        return value


class SeatView(BaseModel):
    """What one seat sees after a reset or step (sessions that play several seats get one each)."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="The seat's observation text.")
    reward: float = Field(default=0.0, description="Reward of this step.")
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = Field(default_factory=dict, description="action / valid / reason of its last answer.")
    legal_actions: list[str] | None = Field(default=None, description="Legal answers now ([] when not its turn).")
    state_key: str | None = Field(default=None, description="The game's state key for this seat, as text.")
    success: bool | None = Field(default=None, description="Whether it succeeded (once the episode is over).")


class GameObservation(Observation):
    """What a session sees: its seat's text, legal answers, reward, and whether the episode is over.

    The top level describes one seat, ``agent``: after a reset, the seat to move; after a step,
    the seat that just answered. ``done`` is terminated or truncated; ``truncated`` says which.
    ``reward`` is the reward of ``agent`` since its previous answer (the other seats' moves
    included). ``info`` is the game's own info of ``agent``'s answer (``action``, ``valid``,
    ``reason``); a ``query`` answers in ``info`` instead. After a round in which several of the
    session's seats answered at once, no one seat did: ``agent`` and ``reward`` are null and
    ``seats`` carries each seat's. Who is to move next is ``active_agents``.
    """

    text: str = Field(default="", description="What `agent` observes now.")
    agent: str | None = Field(
        default=None,
        description="The seat described here: the one that just answered (after a reset: the one to move).",
    )
    active_agents: list[str] = Field(default_factory=list, description="Seats of this session that must answer.")
    legal_actions: list[str] | None = Field(default=None, description="Legal answers of `agent` now.")
    truncated: bool = Field(default=False, description="Whether the episode ended by the step limit.")
    state_key: str | None = Field(default=None, description="The game's state key for `agent`, as text.")
    info: dict[str, Any] = Field(default_factory=dict)
    round: int = Field(default=0, description="Rounds played so far.")
    success: bool | None = Field(default=None, description="Whether `agent` succeeded (once the episode is over).")
    returns: dict[str, float] | None = Field(default=None, description="Every seat's return (once it is over).")
    seats: dict[str, SeatView] | None = Field(
        default=None, description="Every seat's view, for a session that plays several seats."
    )
    influence: dict[str, Any] | None = Field(
        default=None,
        description="The game's exact influence graph of the finished episode (tsmg.influence.InfluenceGraph), "
        "for a game that keeps one (a service game); null otherwise.",
    )


class GameState(State):
    """The session's episode: which game, seed and seats, how far it has gone."""

    game_id: str = ""
    seed: int | None = None
    agents: list[str] = Field(default_factory=list)
    seats: list[str] = Field(default_factory=list, description="The seats this session plays.")
    opponent: str | None = Field(default=None, description="Policy of the other seats.")
    round: int = 0
    done: bool = False
    returns: dict[str, float] = Field(default_factory=dict)


class GameInfo(BaseModel):
    """What ``GET /GAME_ID/info`` says about a served game (enough to build a client before any reset)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    description: str = ""
    agents: list[str]
    turn_based: bool
    has_random_start: bool = Field(description="Whether the first observation changes with the seed (as checked).")
    options: dict[str, Any] = Field(default_factory=dict, description="The options the server made it with.")
    opponents: list[str] = Field(description="Policies a one-seat session may pick for the other seats.")
    default_opponent: str
    client_options: list[str] | None = Field(
        default=None, description="Game options a client may set at reset (null: every option)."
    )
    option_limits: dict[str, float] = Field(
        default_factory=dict, description="Largest value (or size) of an option a client may ask for."
    )
    max_answer_chars: int
    max_sessions: int
    idle_timeout_s: float | None
    tools: list[dict[str, Any]] | None = Field(
        default=None,
        description="A tool-using game's tools (tsmg.tools.ToolSpec, typed arguments), so a client can offer them; "
        "null for other games.",
    )
    provides_influence: bool = Field(
        default=False, description="Whether a finished episode's observation carries the game's influence graph."
    )
