"""Train on any tsmg game with TRL's ``GRPOTrainer``: two routes, ``rollout_func`` and ``environment_factory``.

Example::

    from trl import GRPOConfig, GRPOTrainer
    from tsmg.apps.integrations.trl import GameRollout, GameTools

    game = GameRollout("FrozenLake-v0", seeds=range(64))   # route 1: tsmg plays the episodes
    game = GameTools("FrozenLake-v0", seeds=range(64))     # route 2: TRL plays them (tool calls)
    trainer = GRPOTrainer(model, args=GRPOConfig(num_generations=4, ...), **game.trainer_kwargs())
    trainer.train()

**Route 1, ``rollout_func`` (:class:`GameRollout`): the LAP, token-exact.** tsmg's own rollout
engine plays the episodes, batched across the whole generation batch, under tsmg's LAP (the
prompt template, constrained choice among the legal moves, re-prompts with the reason, the
invalid-answer rule, scripted or model opponents in the other seats), with the model TRL is
training (its current weights, wrapped by :meth:`backends.hf.HFBackend.from_model`, no copy)
or, with ``use_vllm=True``, on TRL's colocated vLLM engine (which TRL fills with the current
weights before each rollout; :meth:`backends.vllm_engine.VLLMBackend.from_llm`). It hands TRL:

* **one game seed per group.** TRL repeats each dataset row ``num_generations`` times in a row;
  a row's prompt names its seed (``"FrozenLake-v0 seed=17"``), so every member of a group starts
  from the same state, and each member's place in the group keys its sampling seed
  (:func:`tsmg.seeding.decision_seed`), so the members differ and the same step replays exactly.
  (``rollout_func`` sees only the prompts, not the row's other columns: that is why the seed is
  in the prompt.)
* **token-exact data.** Each seat plays its episode as one growing token sequence
  (:class:`~tsmg.apps.integrations.conversation.ConversationLAP`): TRL gets the first prompt's ids,
  then the model's sampled tokens and the game's messages between them, with ``env_mask``
  marking the model's tokens (the only ones the loss trains) and the behaviour logprobs, never a
  re-tokenised text. The same episodes are kept as tsmg records (``episodes``, and
  ``episodes_path`` to append them to a JSONL that ``tsmg view`` and ``tsmg export`` read).

The reward TRL normalises within each group is the trained seat's episode return
(:meth:`GameRollout.episode_return`, under the ``tsmg_return`` column). One seat is trained; the
other seats of a multi-agent game are played by ``opponent`` (``random``, ``oracle``,
``fixed:TEXT``, or a :class:`~tsmg.policies.Policy`). With constrained choice tsmg samples among
the legal moves only, while TRL's loss scores the same tokens under the full vocabulary (the
gradient still raises or lowers exactly the tokens sampled). vLLM: only ``vllm_mode="colocate"``,
awake, one engine per process (:func:`check_vllm_settings` refuses the rest, saying what to do):
tsmg needs the engine in its own process for a seed per request and constrained choice.

**Route 2, ``environment_factory`` (:class:`GameTools`): TRL plays, tsmg referees and records.**
TRL builds the prompts, samples (with transformers, or on its vLLM engine in either mode: TRL's
own code), parses the model's tool calls and runs them. tsmg gives it one tool,
``make_move(move)`` (:class:`GameEnvironment`), whose result is what the game shows next; the
episode is tsmg's own (:class:`tsmg.rollout.StepwiseEpisode`: the engine's record, rewards and
invalid-answer rule, the other seats played by ``opponent`` between the model's moves), and the
reward function :meth:`GameTools.episode_return` closes the records and appends them to
``episodes_path``. What this route gives up, and how answers are read:

* **answers are tool calls, parsed by TRL**, with the tokenizer's response template: the chat
  template must render tools and TRL must know how to parse its calls (Qwen2.5/Qwen3, Llama 3.1,
  ...; TRL refuses other templates). The ``move`` argument is given to the game as it is: the
  game's own parser accepts or refuses it, and a refused move comes back to the model with the
  reason (the game's invalid-answer rule applies: penalty, forfeit). A call TRL cannot parse or
  run (bad JSON, a wrong argument name) is answered by TRL with an error and never reaches the
  game. Several calls in one answer are several moves.
* **TRL stops a rollout at the first answer without a call**: that answer is played as an
  invalid move (its text kept in the record), and an episode still unfinished then (or cut by
  ``max_tool_calling_iterations``, ``max_completion_length``) is recorded ``truncated``.
* **what is dropped of the LAP**: constrained choice, re-prompts within a turn, the prompt
  template's history handling (the conversation is TRL's), a seed per sample (TRL seeds the
  batch), and the token ids and logprobs in the records (TRL keeps them; these records are for
  ``tsmg view`` and evaluation, not for ``tsmg export``'s token-exact formats). The first
  message's observation, the move instructions and the list of valid moves are the LAP's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tsmg.apps.integrations.conversation import ConversationLAP, episode_sequence
from tsmg.core import AgentID, Invalid
from tsmg.episode import Episode, write_episodes
from tsmg.lap import LAP, ActionFormat, LAPConfig, PromptTemplate
from tsmg.policies import Decision, Policy, policy_from_spec
from tsmg.registry import make
from tsmg.rollout import EpisodePlan, StepwiseEpisode, rollout
from tsmg.seeding import derive_seed

_SEED = re.compile(r" seed=(-?\d+)$")


class GameRollout:
    """A tsmg game as what TRL's ``GRPOTrainer`` trains on: a dataset of seeds, a rollout function, a reward.

    Args:
        game_id: A registered game id (or a served game's URL).
        seeds: The game seeds the dataset holds, one row each (TRL plays ``num_generations``
            episodes from each).
        lap: Prompt template, action format and re-prompts of the trained seat (default:
            constrained choice among the legal moves). Its history is the conversation itself,
            and temperature and top-p come from the trainer's config.
        agent: The trained seat (default: the game's first agent).
        opponent: Who plays the other seats: ``random``, ``oracle``, ``fixed:TEXT`` or a policy.
        game_options: Options the game is made with.
        episodes_path: Append every rollout's episodes to this JSONL file (None: keep only the last).

    Raises:
        ValueError: An unknown game or seat, or a bad option.
    """

    def __init__(
        self,
        game_id: str,
        seeds: Iterable[int],
        *,
        lap: LAPConfig | None = None,
        agent: AgentID | None = None,
        opponent: str | Policy = "random",
        game_options: Mapping[str, Any] | None = None,
        episodes_path: str | Path | None = None,
    ) -> None:
        """Check the game and seat, and lay out the dataset (see the class docstring)."""
        self.game_id = game_id
        self.game_options = dict(game_options or {})
        game = make(game_id, **self.game_options)
        self.agents = list(game.agents)
        self.agent = agent if agent is not None else game.agents[0]
        if self.agent not in game.agents:
            raise ValueError(f"{game_id} has no seat {self.agent!r}; its seats are {', '.join(game.agents)}")
        self.seeds = [int(seed) for seed in seeds]
        if not self.seeds:
            raise ValueError("give at least one game seed")
        self.lap = lap or LAPConfig(action_format=ActionFormat(kind="choice"))
        self.opponent = opponent
        self.episodes_path = Path(episodes_path) if episodes_path is not None else None
        #: The episodes of the latest rollout, in TRL's row order.
        self.episodes: list[Episode] = []
        self._backend: Any = None

    # ------------------------------------------------------------------ what the trainer takes
    def prompt(self, seed: int) -> str:
        """The dataset prompt of ``seed`` (what names the seed to :meth:`rollout_func`)."""
        return f"{self.game_id} seed={seed}"

    def dataset(self) -> Any:
        """A ``datasets.Dataset`` with one row per seed: ``prompt`` (naming the seed) and ``seed``."""
        from datasets import Dataset

        return Dataset.from_dict({"prompt": [self.prompt(seed) for seed in self.seeds], "seed": self.seeds})

    def trainer_kwargs(self) -> dict[str, Any]:
        """``train_dataset``, ``rollout_func`` and ``reward_funcs`` for ``GRPOTrainer(model, args=..., **these)``."""
        return {"train_dataset": self.dataset(), "rollout_func": self.rollout_func, "reward_funcs": self.episode_return}

    @staticmethod
    def episode_return(completions: list[Any], tsmg_return: list[float], **kwargs: Any) -> list[float]:
        """TRL reward function: the trained seat's episode return, as the rollout recorded it."""
        return [float(value) for value in tsmg_return]

    # ------------------------------------------------------------------ the rollout
    def rollout_func(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        """Play one episode per prompt with the trainer's current model; TRL's ``rollout_func``.

        Returns:
            ``prompt_ids``, ``completion_ids``, ``logprobs`` and ``env_mask`` per row (see the
            module docstring), plus ``tsmg_return``, ``tsmg_success``, ``tsmg_seed`` and
            ``tsmg_episode_id``, which TRL hands to the reward functions.

        Raises:
            ValueError: A prompt that names no seed, or vLLM settings this route cannot use
                (:func:`check_vllm_settings`).
            RuntimeError: An episode failed (the message is the episode's error).
        """
        args = trainer.args
        check_vllm_settings(args)
        seeds = [self._seed_of(prompt) for prompt in prompts]
        step, process = int(trainer.state.global_step), int(trainer.accelerator.process_index)
        mode = "train" if trainer.model.training else "eval"
        plans = []
        seen: dict[int, int] = {}
        for position, seed in enumerate(seeds):
            # TRL lays a group's members out one after another; a member's place in the group keys its
            # sampling seed. The process offset keeps members that land on other processes distinct.
            member = seen.get(seed, 0) + process * len(seeds)
            seen[seed] = seen.get(seed, 0) + 1
            group = f"trl/{mode}/u{step}/s{seed}"
            plans.append(EpisodePlan(seed, f"{group}/g{member}/p{position}", group, member))
        config = self.lap.model_copy(
            update={
                "temperature": float(args.temperature),
                "top_p": float(args.top_p),
                "seed": derive_seed(int(args.seed), step, mode == "eval"),
            }
        )
        policy = ConversationLAP(self._model(trainer), config)
        opponent = (
            policy_from_spec(self.opponent, seed=config.seed, scripted_only=True)
            if isinstance(self.opponent, str)
            else self.opponent
        )
        seats = {seat: policy if seat == self.agent else opponent for seat in self.agents}
        episodes = rollout(self.game_id, seats, plans=plans, game_options=self.game_options)
        self.episodes = episodes
        if self.episodes_path is not None:
            write_episodes(self.episodes_path, episodes)
        return self._rows(episodes)

    def _rows(self, episodes: list[Episode]) -> dict[str, list[Any]]:
        rows: dict[str, list[Any]] = {
            key: []
            for key in (
                "prompt_ids",
                "completion_ids",
                "logprobs",
                "env_mask",
                "tsmg_return",
                "tsmg_success",
                "tsmg_seed",
                "tsmg_episode_id",
            )
        }
        end_of_turn = list(self._backend.eos_ids[:1])
        for episode in episodes:
            if episode.error is not None:
                raise RuntimeError(f"episode {episode.episode_id} failed: {episode.error}")
            sequence = episode_sequence(episode, self.agent)
            completion, mask, logprobs = sequence.completion_ids, sequence.model_mask, sequence.logprobs
            if end_of_turn and completion[-1:] != end_of_turn:
                # Close the last answer as the template would (a game token, not trained), so that TRL does
                # not count a finished episode as a truncated completion.
                completion, mask, logprobs = completion + end_of_turn, mask + [0], logprobs + [0.0]
            rows["prompt_ids"].append(sequence.prompt_ids)
            rows["completion_ids"].append(completion)
            rows["logprobs"].append(logprobs)
            rows["env_mask"].append(mask)
            rows["tsmg_return"].append(float(episode.returns.get(self.agent, 0.0)))
            rows["tsmg_success"].append(episode.success.get(self.agent))
            rows["tsmg_seed"].append(episode.seed)
            rows["tsmg_episode_id"].append(episode.episode_id)
        return rows

    def _seed_of(self, prompt: Any) -> int:
        text = prompt if isinstance(prompt, str) else ""
        match = _SEED.search(text)
        if match is None or not text.startswith(self.game_id):
            raise ValueError(
                f"the prompt {prompt!r} names no seed of {self.game_id}: train on GameRollout.dataset() "
                f"(prompts like {self.prompt(0)!r})"
            )
        return int(match.group(1))

    def _model(self, trainer: Any) -> Any:
        """The backend the episodes are sampled with (built once per engine; it reads the live weights).

        With ``use_vllm=True`` (colocated): TRL's own engine, into which TRL pushed the current
        weights before calling :meth:`rollout_func`; otherwise tsmg's HF backend over the model
        the trainer trains.
        """
        tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
        if getattr(trainer.args, "use_vllm", False):
            from backends.vllm_engine import VLLMBackend

            llm = trainer.vllm_generation.llm
            if self._backend is None or getattr(self._backend, "llm", None) is not llm:
                self._backend = VLLMBackend.from_llm(llm, tokenizer=tokenizer, name=f"trl-vllm:{self.game_id}")
            return self._backend
        from backends.hf import HFBackend

        model = trainer.accelerator.unwrap_model(trainer.model)
        if self._backend is None or getattr(self._backend, "model", None) is not model:
            self._backend = HFBackend.from_model(model, tokenizer, name=f"trl:{self.game_id}")
        return self._backend


def check_vllm_settings(args: Any) -> None:
    """Refuse the ``GRPOConfig`` vLLM settings :meth:`GameRollout.rollout_func` cannot generate with.

    tsmg samples the episodes itself (a seed per request, constrained choice among the legal
    moves, token-id prompts that extend the conversation), so it needs the engine in the
    trainer's process: ``vllm_mode="colocate"``, awake, one engine per process.

    Example:
        >>> from types import SimpleNamespace
        >>> check_vllm_settings(SimpleNamespace(use_vllm=True, vllm_mode="colocate"))
        >>> check_vllm_settings(SimpleNamespace(use_vllm=True, vllm_mode="server"))
        Traceback (most recent call last):
        ...
        ValueError: tsmg's rollout_func generates in the trainer's process: ...

    Raises:
        ValueError: A setting this route cannot use (the message says which, and what to do).
    """
    if not getattr(args, "use_vllm", False):
        return
    if getattr(args, "vllm_mode", "colocate") != "colocate":
        raise ValueError(
            "tsmg's rollout_func generates in the trainer's process: with use_vllm=True set vllm_mode='colocate' "
            "(TRL's server client takes neither a seed per request nor constrained choice), or train through "
            "GameTools (environment_factory), where TRL generates on its vLLM server itself"
        )
    if getattr(args, "vllm_enable_sleep_mode", False):
        raise ValueError(
            "tsmg's rollout_func calls TRL's colocated engine directly, which sleep mode leaves asleep between TRL's "
            "own calls: set vllm_enable_sleep_mode=False"
        )
    if int(getattr(args, "vllm_tensor_parallel_size", 1) or 1) != 1:
        raise ValueError(
            "tsmg's rollout_func samples each process's episodes on its own engine: set vllm_tensor_parallel_size=1 "
            "(one engine per process), or train through GameTools (environment_factory)"
        )


# ---------------------------------------------------------------------- the environment_factory route
#: The move tool's name: the LAP's own (``ActionFormat(kind="tool").tool_name``), so records read alike.
TOOL_NAME = "make_move"


class GameTools:
    """A tsmg game as TRL's ``environment_factory``: TRL plays the episodes, the model calls ``make_move``.

    TRL renders the tool in the prompt, parses the model's tool calls with the tokenizer's response
    template, runs each call as :meth:`GameEnvironment.make_move` and feeds the result back, until
    the model answers without a call (see the module docstring for what this route keeps of the LAP).
    Each finished rollout is scored by :meth:`episode_return` (the trained seat's return), which also
    closes the episodes' tsmg records and appends them to ``episodes_path``.

    Args:
        game_id: A registered game id.
        seeds: The game seeds the dataset holds, one row each.
        agent: The trained seat (default: the game's first agent).
        opponent: Who plays the other seats: ``random``, ``oracle``, ``fixed:TEXT`` or a policy.
        game_options: Options the game is made with.
        system: The system message of every prompt (default: the LAP's).
        episodes_path: Append every scored episode to this JSONL file (None: keep only the last batch).

    Raises:
        ValueError: An unknown game or seat, no seeds, or a bad option.
    """

    def __init__(
        self,
        game_id: str,
        seeds: Iterable[int],
        *,
        agent: AgentID | None = None,
        opponent: str | Policy = "random",
        game_options: Mapping[str, Any] | None = None,
        system: str | None = None,
        episodes_path: str | Path | None = None,
    ) -> None:
        """Check the game and seat, and lay out the dataset."""
        self.game_id = game_id
        self.game_options = dict(game_options or {})
        game = make(game_id, **self.game_options)
        self.agent = agent if agent is not None else game.agents[0]
        if self.agent not in game.agents:
            raise ValueError(f"{game_id} has no seat {self.agent!r}; its seats are {', '.join(game.agents)}")
        self.seeds = [int(seed) for seed in seeds]
        if not self.seeds:
            raise ValueError("give at least one game seed")
        template = PromptTemplate(history="none")
        if system is not None:
            template = template.model_copy(update={"system": system})
        # The LAP words the observations and the move instructions; TRL, not the LAP, calls the model.
        self.lap = LAP(_TRLCallsTheModel(), LAPConfig(template=template, action_format=ActionFormat(kind="tool")))
        self.opponent = (
            policy_from_spec(opponent, seed=0, scripted_only=True) if isinstance(opponent, str) else opponent
        )
        self.episodes_path = Path(episodes_path) if episodes_path is not None else None
        #: The episodes of the latest scored batch, in TRL's row order.
        self.episodes: list[Episode] = []

    def dataset(self) -> Any:
        """A ``datasets.Dataset``: per seed a chat ``prompt`` (``reset`` adds the game's message) and the ``seed``."""
        from datasets import Dataset

        system = self.lap.config.template.system
        prompt = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": ""}]
        return Dataset.from_dict({"prompt": [prompt] * len(self.seeds), "seed": self.seeds})

    def environment(self) -> GameEnvironment:
        """A new environment (TRL's ``environment_factory``; it makes one per concurrent rollout)."""
        return GameEnvironment(self)

    def trainer_kwargs(self) -> dict[str, Any]:
        """``train_dataset``, ``environment_factory``, ``reward_funcs``: ``GRPOTrainer(model, args=..., **these)``."""
        return {
            "train_dataset": self.dataset(),
            "environment_factory": self.environment,
            "reward_funcs": self.episode_return,
        }

    def episode_return(
        self, completions: list[Any], environments: list[GameEnvironment], trainer_state: Any = None, **kwargs: Any
    ) -> list[float]:
        """TRL reward function: close each rollout's episode, record it, and return the trained seat's return.

        An answer that called no tool while the game was still on is the seat's last answer: it is
        played as an invalid answer (the game's invalid-answer rule applies: penalty, forfeit); an
        episode TRL stopped before the game ended is recorded ``truncated``.
        """
        from accelerate import PartialState

        step = int(getattr(trainer_state, "global_step", 0))
        process = PartialState().process_index
        seen: dict[int, int] = {}
        episodes = []
        for position, (messages, environment) in enumerate(zip(completions, environments, strict=True)):
            episode = environment._close(_last_answer(messages))
            seed = int(episode.seed if episode.seed is not None else 0)
            member = seen.get(seed, 0) + process * len(environments)
            seen[seed] = seen.get(seed, 0) + 1
            episode.group_id = f"trl-tools/u{step}/s{seed}"
            episode.episode_id = f"{episode.group_id}/g{member}/p{position}"
            episodes.append(episode)
        self.episodes = episodes
        if self.episodes_path is not None:
            write_episodes(self.episodes_path, episodes)
        return [float(episode.returns.get(self.agent, 0.0)) for episode in episodes]


class GameEnvironment:
    """One rollout's game for TRL's ``environment_factory``: ``reset`` from the row, the ``make_move`` tool.

    TRL exposes every public method but ``reset`` as a tool, so this class has exactly one.
    """

    def __init__(self, route: GameTools) -> None:
        """An environment of ``route``'s game (no episode until :meth:`reset`)."""
        self._route = route
        self._episode: StepwiseEpisode | None = None

    def reset(self, seed: int, **row: Any) -> str:
        """Start the episode of the row's ``seed``; the first observation and the move instructions."""
        route = self._route
        self._episode = StepwiseEpisode(
            route.game_id,
            EpisodePlan(int(seed), f"trl-tools/s{seed}"),
            route.agent,
            route.opponent,
            name="trl",
            game_options=route.game_options,
        )
        return self._prompt()

    def make_move(self, move: str) -> str:
        """Play your move in the game.

        Args:
            move: Your move, written exactly as the game lists the valid moves.

        Returns:
            What the game shows next: the new position, or why the move was refused.
        """
        episode = self._episode
        if episode is None:
            raise RuntimeError("make_move before reset: TRL resets every environment before generating")
        if episode.finished:
            return "The game is over; do not call make_move again."
        arguments = json.dumps({"move": move})
        episode.play(
            Decision(
                move,
                completion=f"{TOOL_NAME}({arguments})",
                prompt=self._route.lap.messages(episode.request()),
                tool_calls=[{"name": TOOL_NAME, "arguments": arguments, "id": None}],
            )
        )
        mine = episode.record.steps_of(self._route.agent)[-1]
        if episode.finished:
            return f"The game is over. Your return: {episode.record.returns.get(self._route.agent, 0.0):g}."
        refused = "" if mine.valid else f"That move was invalid: {mine.reason}.\n\n"
        return refused + self._prompt()

    def _close(self, last_answer: str | None) -> Episode:
        """End the episode: ``last_answer`` (an answer without a tool call) is played as invalid; its record."""
        episode = self._episode
        if episode is None:
            raise RuntimeError("no episode to close: TRL resets every environment before generating")
        if last_answer is not None and not episode.finished:
            reason = f"no {TOOL_NAME} call in the answer"
            episode.play(Decision(Invalid(reason), completion=last_answer))
        self._episode = None
        return episode.stop()

    def _prompt(self) -> str:
        assert self._episode is not None
        return self._route.lap.messages(self._episode.request())[-1]["content"]


def _last_answer(messages: Any) -> str | None:
    """The rollout's last answer if it called no tool (TRL stops there), else None (TRL stopped it)."""
    if isinstance(messages, str):
        return messages
    last = messages[-1] if messages else None
    if isinstance(last, Mapping) and last.get("role") == "assistant" and not last.get("tool_calls"):
        return str(last.get("content") or "")
    return None


class _TRLCallsTheModel:
    """The LAP's model slot where TRL calls the model: never called."""

    name = "trl"

    def generate(self, requests: Any, sampling: Any) -> Any:
        raise RuntimeError("GameTools never calls a model: TRL's trainer does")
