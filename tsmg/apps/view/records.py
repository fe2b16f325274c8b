"""Tolerant reading of run files: JSONL lines and episodes of any tsmg version, as plain dicts.

A report must build from whatever a run folder holds: a torn last line left by ``kill -9``, a
line that is not JSON, an episode written before a field existed (or after one was added), text
of any kind in a model's answer. Nothing here raises on bad content; each problem becomes a
:class:`ReadProblem` (for the report's "could not read" panel) or an issue on the episode itself.

Episodes are read as dicts, never through the :class:`~tsmg.episode.Episode` model, so that
records of older and newer versions (missing or extra fields) still show what they hold.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tsmg.episode import Episode, StepRecord

#: Most characters of an unknown field's JSON shown in the report (the rest is cut, and says so).
EXTRA_FIELD_CHARS = 2_000

# Fields the viewer shows in places of their own. Beyond the current record's fields these are
# the ones newer versions add (per-step offered choices, prompt token ids, a model's thinking
# text and its token count; a schema version on the episode); anything else unknown is shown
# as an "other field".
STEP_FIELDS_SHOWN = set(StepRecord.model_fields) | {"choices", "prompt_token_ids", "reasoning", "reasoning_tokens"}
EPISODE_FIELDS_SHOWN = set(Episode.model_fields) | {"schema_version", "version"}
# Token-level arrays are kept out of the report (their size would dwarf the text); their
# lengths are shown instead.
TOKEN_ARRAYS = ("token_ids", "logprobs", "prompt_token_ids")
_STEP_KEPT = set(StepRecord.model_fields)


@dataclass(frozen=True)
class ReadProblem:
    """Something in a run folder the report could not read (or read only in part).

    Attributes:
        file: The file, relative to the run folder.
        line: Line number (1-based) in a JSONL file, or None for the whole file.
        message: What was wrong and what the report did about it.
    """

    file: str
    line: int | None
    message: str

    def as_dict(self) -> dict[str, Any]:
        """The problem as a JSON-ready dict."""
        return {"file": self.file, "line": self.line, "message": self.message}


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, ReadProblem | None]]:
    """Yield ``(line number, object, problem)`` for every non-blank line, streaming.

    Exactly one of object and problem is set. A last line without its newline that does not
    parse is reported as a torn write (an interrupted run); bytes that are not UTF-8 are
    replaced and reported.
    """
    name = path.name
    with open(path, "rb") as handle:
        previous: bytes | None = None
        number = 0
        for raw in handle:
            if previous is not None:
                yield _parse_line(name, number, previous, last=False)
            number += 1
            previous = raw
        if previous is not None:
            yield _parse_line(name, number, previous, last=True)


def _parse_line(
    name: str, number: int, raw: bytes, last: bool
) -> tuple[int, dict[str, Any] | None, ReadProblem | None]:
    if not raw.strip():
        return number, None, None
    text = raw.decode("utf-8", errors="replace")
    try:
        value = json.loads(text)
    except ValueError:
        if last and not raw.endswith(b"\n"):
            return number, None, ReadProblem(name, number, "truncated last line (an interrupted write): skipped")
        return number, None, ReadProblem(name, number, "not a JSON line: skipped")
    if not isinstance(value, dict):
        return number, None, ReadProblem(name, number, f"a JSON {type(value).__name__}, not an object: skipped")
    if "\ufffd" in text and b"\xef\xbf\xbd" not in raw:
        value.setdefault("_read_issues", []).append("bytes that are not UTF-8 were replaced")
    return number, value, None


def finite(value: Any) -> float | None:
    """``value`` as a float if it is a finite number, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


class _Fields:
    """Typed access to one raw record that notes every field it had to drop or convert."""

    def __init__(self, raw: dict[str, Any], where: str, issues: list[str]) -> None:
        self.raw = raw
        self.where = where
        self.issues = issues

    def text(self, key: str) -> str | None:
        value = self.raw.get(key)
        if value is None or isinstance(value, str):
            return value
        self.issues.append(f"{self.where}{key} is a {type(value).__name__}, not text: shown as JSON")
        return _json_text(value)

    def integer(self, key: str) -> int | None:
        value = self.raw.get(key)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        self.issues.append(f"{self.where}{key} is not a whole number ({_json_text(value, 40)}): ignored")
        return None

    def number(self, key: str, default: float | None = None) -> float | None:
        value = self.raw.get(key)
        if value is None:
            return default
        number = finite(value)
        if number is None:
            self.issues.append(f"{self.where}{key} is not a finite number ({_json_text(value, 40)}): ignored")
            return default
        return number

    def flag(self, key: str, default: bool | None = None) -> bool | None:
        value = self.raw.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        self.issues.append(f"{self.where}{key} is not true/false ({_json_text(value, 40)}): ignored")
        return default

    def mapping(self, key: str) -> dict[str, Any]:
        value = self.raw.get(key)
        if value is None:
            return {}
        if isinstance(value, dict):
            return value
        self.issues.append(f"{self.where}{key} is not an object: ignored")
        return {}

    def strings(self, key: str) -> list[str] | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if isinstance(value, list):
            return [item if isinstance(item, str) else _json_text(item) for item in value]
        self.issues.append(f"{self.where}{key} is not a list: ignored")
        return None

    def extras(self, known: set[str]) -> dict[str, str]:
        return {
            key: _json_text(value, EXTRA_FIELD_CHARS)
            for key, value in self.raw.items()
            if key not in known and not key.startswith("_read")
        }


def _json_text(value: Any, limit: int | None = None) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    if limit is not None and len(text) > limit:
        return text[:limit] + f"… ({len(text) - limit} more characters)"
    return text


def normalise_episode(raw: dict[str, Any], line: int) -> dict[str, Any]:
    """The display record of one raw episode dict: every known field checked, nothing raised.

    The result holds the episode's fields under their own names (``policies``, ``returns``,
    ``success`` per agent; ``steps`` as display steps, see :func:`normalise_step`), plus
    ``issues`` (what could not be read, in words) and ``extra`` (fields this version does not
    know, as JSON text). Token-id and log-probability arrays are replaced by their lengths.
    """
    issues: list[str] = list(raw.get("_read_issues", []))
    fields = _Fields(raw, "", issues)
    missing = [name for name, info in Episode.model_fields.items() if info.is_required() and name not in raw]
    if missing:
        issues.append(f"missing {', '.join(missing)} (an older or foreign record): shown with what it has")
    raw_steps = raw.get("steps")
    if raw_steps is not None and not isinstance(raw_steps, list):
        issues.append("steps is not a list: ignored")
        raw_steps = None
    steps = []
    for position, raw_step in enumerate(raw_steps or []):
        if isinstance(raw_step, dict):
            steps.append(normalise_step(raw_step, position, issues))
        else:
            issues.append(f"step {position} is not an object: skipped")
    policies = {str(agent): str(name) for agent, name in fields.mapping("policies").items()}
    agents = fields.strings("agents") or list(policies) or list(dict.fromkeys(step["agent"] for step in steps))
    for agent in agents:
        policies.setdefault(agent, "?")
    returns = {str(agent): finite(value) for agent, value in fields.mapping("returns").items()}
    success = {
        str(agent): value if isinstance(value, bool) else None for agent, value in fields.mapping("success").items()
    }
    for agent, value in fields.mapping("returns").items():
        if finite(value) is None:
            issues.append(f"returns of {agent} is not a finite number ({_json_text(value, 40)}): ignored")
    for agent, value in fields.mapping("success").items():
        if value is not None and not isinstance(value, bool):
            issues.append(f"success of {agent} is not true/false/null ({_json_text(value, 40)}): ignored")
    invalid = fields.integer("invalid_answers")
    counted_invalid = sum(1 for step in steps if not step["valid"])
    version = raw.get("schema_version", raw.get("version"))
    influence = _influence_graphs(raw.get("influence"), issues)
    _tool_exchanges(steps, influence)
    return {
        "line": line,
        "episode_id": fields.text("episode_id") or f"line {line}",
        "game_id": fields.text("game_id") or "?",
        "game_options": fields.mapping("game_options"),
        "seed": fields.integer("seed"),
        "group_id": fields.text("group_id"),
        "agents": agents,
        "policies": policies,
        "returns": returns,
        "success": success,
        "terminated": fields.flag("terminated", False),
        "truncated": fields.flag("truncated", False),
        "num_rounds": fields.integer("num_rounds"),
        "invalid_answers": counted_invalid if invalid is None or steps else invalid,
        "prompt_tokens": fields.integer("prompt_tokens"),
        "completion_tokens": fields.integer("completion_tokens"),
        "latency_s": fields.number("latency_s"),
        "error": fields.text("error"),
        "schema_version": None if version is None else _json_text(version, 40).strip('"'),
        "steps": steps,
        "influence": influence,
        "extra": fields.extras(EPISODE_FIELDS_SHOWN),
        "issues": issues,
    }


def normalise_step(raw: dict[str, Any], position: int, issues: list[str]) -> dict[str, Any]:
    """The display record of one raw step dict (see :func:`normalise_episode`).

    Problems are appended to ``issues``, each naming the step.
    """
    fields = _Fields(raw, f"step {position}: ", issues)
    index = fields.integer("index")
    valid = fields.flag("valid", True)
    observation = fields.text("observation")
    prompt = _prompt_messages(raw.get("prompt"), fields)
    return {
        "index": position if index is None else index,
        "round": fields.integer("round"),
        "agent": fields.text("agent") or "?",
        "observation": observation,
        "model_observation": model_observation(observation, prompt),
        "prompt": prompt,
        "completion": fields.text("completion"),
        "reasoning": fields.text("reasoning"),
        "action": fields.text("action"),
        "parsed_action": fields.text("parsed_action"),
        "valid": bool(valid),
        "reason": fields.text("reason"),
        "attempts": fields.integer("attempts"),
        "reward": fields.number("reward"),
        "choices": fields.strings("choices"),
        "tool_calls": _tool_calls(raw.get("tool_calls"), fields),
        "votes": _votes(raw.get("votes"), fields),
        "state_key": fields.text("state_key"),
        "prompt_tokens": fields.integer("prompt_tokens"),
        "completion_tokens": fields.integer("completion_tokens"),
        "reasoning_tokens": fields.integer("reasoning_tokens"),
        "latency_s": fields.number("latency_s"),
        "token_counts": {key: len(raw[key]) for key in TOKEN_ARRAYS if isinstance(raw.get(key), list)},
        "extra": fields.extras(STEP_FIELDS_SHOWN),
    }


def _votes(value: Any, fields: _Fields) -> list[dict[str, Any]] | None:
    """A majority vote's records (one per attempt, schema 7), each answer beside the move it names.

    Each attempt becomes ``{"ballots": [{answer, move, reason}], "tally": [[move, count]], "played"}``,
    the tally sorted by count (most first); a malformed attempt is noted and left out.
    """
    if value is None:
        return None
    if not isinstance(value, list):
        fields.issues.append(f"{fields.where}votes is not a list: ignored")
        return None
    attempts: list[dict[str, Any]] = []
    for number, attempt in enumerate(value, 1):
        answers = attempt.get("answers") if isinstance(attempt, dict) else None
        if not isinstance(answers, list):
            fields.issues.append(f"{fields.where}votes attempt {number} has no list of answers: ignored")
            continue
        moves, reasons = attempt.get("moves") or [], attempt.get("reasons") or []
        ballots = [
            {
                "answer": answer if isinstance(answer, str) else _json_text(answer),
                "move": moves[n] if n < len(moves) and isinstance(moves[n], str) else None,
                "reason": reasons[n] if n < len(reasons) and isinstance(reasons[n], str) else None,
            }
            for n, answer in enumerate(answers)
        ]
        tally = attempt.get("tally") if isinstance(attempt.get("tally"), dict) else {}
        counts = sorted(
            ((str(move), count) for move, count in tally.items() if isinstance(count, int)),
            key=lambda item: -item[1],
        )
        played = attempt.get("played") if isinstance(attempt.get("played"), str) else None
        attempts.append({"ballots": ballots, "tally": [list(item) for item in counts], "played": played})
    return attempts


def _tool_calls(value: Any, fields: _Fields) -> list[dict[str, Any]] | None:
    """A hosted model's function calls as ``{name, arguments}`` (arguments decoded from JSON where they are)."""
    if value is None:
        return None
    if not isinstance(value, list):
        fields.issues.append(f"{fields.where}tool_calls is not a list: ignored")
        return None
    calls: list[dict[str, Any]] = []
    for call in value:
        if not isinstance(call, dict):
            calls.append({"name": "?", "arguments": _json_text(call)})
            continue
        arguments = call.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                pass  # shown as the model wrote it
        calls.append({"name": str(call.get("name", "?")), "arguments": arguments})
    return calls


def _influence_graphs(value: Any, issues: list[str]) -> dict[str, dict[str, Any]]:
    """The episode's influence graphs by who made them, each checked (:class:`tsmg.influence.InfluenceGraph`)."""
    from tsmg.influence import InfluenceGraph

    if value is None:
        return {}
    if not isinstance(value, dict):
        issues.append("influence is not an object: ignored")
        return {}
    graphs = {}
    for name, graph in value.items():
        try:
            graphs[str(name)] = InfluenceGraph.model_validate(graph).model_dump(mode="json")
        except ValueError as error:
            first = str(error).splitlines()[1:2] or [str(error)]
            issues.append(f"influence graph {name!r} is not a valid graph ({first[0].strip()[:200]}): ignored")
    return graphs


def _tool_exchanges(steps: list[dict[str, Any]], influence: dict[str, dict[str, Any]]) -> None:
    """Give each step of a tool-using game its tool call, the result the game returned, and what it used.

    A step's ``tool_call`` is ``{name, arguments}``: the model's function call where it made one, else its
    move in the text form of :mod:`tsmg.tools` where the influence graph (the ``exact`` one first) says the
    step was an action. ``tool_result`` is ``{kind, text}``: the message that action produced (a tool's or
    the user's), its text the lines it added to the next observation of the same seat (None when no step
    followed). ``influence`` lists the graph's edges into that action, each naming the message or action it
    used, its kind (``support``/``failure``) and the fields.
    """
    from tsmg.tools import read_call

    if not influence:
        for step in steps:
            if step["tool_calls"]:
                step["tool_call"] = step["tool_calls"][0]
        return
    name = "exact" if "exact" in influence else next(iter(influence))
    graph = influence[name]
    nodes = {node["id"]: node for node in graph["nodes"]}
    actions = {node["step"]: node for node in graph["nodes"] if node["kind"] == "action"}
    produced = {node["produced_by"]: node for node in graph["nodes"] if node["produced_by"] is not None}
    for position, step in enumerate(steps):
        action = actions.get(step["index"])
        if step["tool_calls"]:
            step["tool_call"] = step["tool_calls"][0]
        elif action is not None and step["action"]:
            call = read_call(step["action"])
            if call is not None:
                step["tool_call"] = {"name": call[0], "arguments": call[1]}
        if action is None:
            continue
        message = produced.get(action["id"])
        if message is not None:
            following = next((later for later in steps[position + 1 :] if later["agent"] == step["agent"]), None)
            step["tool_result"] = {
                "kind": message["kind"],
                "text": None if following is None else _added_lines(step, following["observation"]),
            }
        step["influence"] = {
            "graph": name,
            "used": [
                {
                    "source": edge["source"],
                    "source_kind": nodes[edge["source"]]["kind"],
                    "source_label": nodes[edge["source"]]["label"],
                    "source_step": nodes[edge["source"]]["step"],
                    "kind": edge["kind"],
                    "fields": edge["fields"],
                }
                for edge in graph["edges"]
                if edge["target"] == action["id"]
            ],
        }


def _added_lines(step: dict[str, Any], after: str | None) -> str | None:
    """The lines ``after`` inserted into the step's observation (a transcript grows), less the echo of its answer.

    The lines both share at the start and at the end are dropped, so a result equal to an earlier one (the same
    lookup twice) is still found where the transcript added it.
    """
    if after is None:
        return None
    lines, later = (step["observation"] or "").splitlines(), after.splitlines()
    start = 0
    while start < min(len(lines), len(later)) and lines[start] == later[start]:
        start += 1
    end = 0
    while end < min(len(lines), len(later)) - start and lines[-1 - end] == later[-1 - end]:
        end += 1
    echoed = step["action"] or step["completion"] or ""
    added = [line for line in later[start : len(later) - end] if line.strip() and not (echoed and echoed in line)]
    return "\n".join(added) or None


def model_observation(observation: str | None, prompt: list[list[str]] | None) -> str | None:
    r"""The part of ``observation`` the model's prompt held, where it held less than all of it.

    A step records the game's whole observation, but a compact view (``rollout.observation_lines``)
    shows the model only the lines that match a pattern: the lines of the observation that the
    prompt's last user message holding any of them holds are what the model saw (after a re-prompt
    the last user message is the re-prompt, which holds none). None when there is no prompt (a
    scripted policy) or a user message held the whole observation.

    Example:
        >>> model_observation("Board:\nP_\n_G\nGo.", [["system", "Play."], ["user", "P_\n_G\n\nAnswer."]])
        'P_\n_G'
        >>> model_observation("Board:\nP_", [["user", "Board:\nP_"], ["assistant", "fly"], ["user", "Invalid."]])
    """
    users = [content for role, content in prompt or [] if role == "user"]
    if not observation or not users or any(observation in content for content in users):
        return None
    lines = [line for line in observation.splitlines() if line.strip()]
    for content in reversed(users):
        held = set(content.splitlines())
        if any(line in held for line in lines):
            return "\n".join(line for line in lines if line in held)
    return ""


def _prompt_messages(value: Any, fields: _Fields) -> list[list[str]] | None:
    """Chat messages as ``[role, content]`` pairs (content that is not text is shown as JSON)."""
    if value is None:
        return None
    if isinstance(value, str):
        return [["prompt", value]]
    if not isinstance(value, list):
        fields.issues.append(f"{fields.where}prompt is not a list of messages: shown as JSON")
        return [["prompt", _json_text(value)]]
    messages = []
    for message in value:
        if isinstance(message, dict):
            content = message.get("content")
            text = content if isinstance(content, str) else _json_text(content)
            messages.append([str(message.get("role", "?")), text])
        else:
            messages.append(["?", message if isinstance(message, str) else _json_text(message)])
    return messages


def lenient_episode(raw: dict[str, Any]) -> Episode | None:
    """An :class:`Episode` for the statistics, from the fields this version knows; None if it cannot be.

    Text the statistics never read (observations, prompts and their tools, answers, token arrays)
    is dropped, so recomputing a summary over a large run keeps memory small.
    """
    data = {key: value for key, value in raw.items() if key in Episode.model_fields and key != "steps"}
    dropped = {"observation", "prompt", "tools", "completion", *TOKEN_ARRAYS}
    raw_steps = raw.get("steps")
    data["steps"] = [
        {"observation": "", **{key: value for key, value in step.items() if key in _STEP_KEPT and key not in dropped}}
        for step in (raw_steps if isinstance(raw_steps, list) else [])
        if isinstance(step, dict)
    ]
    try:
        return Episode.model_validate(data)
    except ValueError:
        return None


def seat_results(raw: dict[str, Any]) -> dict[str, str] | None:
    """Each seat's result in a finished episode of a win/draw/loss game, forfeits named; None otherwise.

    ``win``, ``draw`` or ``loss`` (:func:`tsmg.summary.seat_outcomes`), with ``(forfeited)`` after a
    seat's own forfeit and ``(by forfeit)`` after a win it owes to another seat's.
    """
    from tsmg.summary import forfeits, outcome_kind, seat_outcomes

    episode = lenient_episode(raw)
    if episode is None or episode.error is not None or not episode.agents or outcome_kind(episode) == "goal":
        return None
    gone = forfeits(episode)
    results = {}
    for agent, result in seat_outcomes(episode, gone=gone).items():
        note = " (forfeited)" if agent in gone else " (by forfeit)" if gone and result == "win" else ""
        results[agent] = result + note
    return results
