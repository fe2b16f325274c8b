"""Rollout speed of the HF backend: full Frozen Lake rollouts against raw ``model.generate``.

For each tiny model (built on the spot, see :mod:`backends.tiny`) and each concurrency level,
the same episodes are played by ``tsmg.rollout.rollout`` with ``LAP(HFBackend)``:

- **ours, batched**: every live episode's turn in one ``generate`` call per round (the engine's
  normal mode), the whole rollout timed (prompt building, game steps and parsing included);
- **raw, batched**: one ``model.generate`` per round over the very prompts of that round, with
  exactly as many new tokens as the longest completion of the round (tokenised beforehand,
  nothing else timed);
- **ours, one at a time**: the same episodes played one after the other (``max_concurrent=1``);
- **raw, one at a time**: ``model.generate`` on each prompt alone.

Tokens/s count the completion tokens the rollout wrote (the same count for all four). Seeds
make sampling independent of batching, so the one-at-a-time rollout replays the very same
episodes (checked and reported). The one-at-a-time rates are measured on the first
``--single-episodes`` episodes only (a rate does not need them all).

Ratios: ``a = ours batched / raw batched`` (target >= 0.9) and ``b = (ours batched / ours one
at a time) / (raw batched / raw one at a time)`` (target >= 0.9). Every time is the best of
``--repeats`` runs: the machine may be shared, and the best run is the least disturbed.

Usage: python bench/rollout_speed.py [--presets 0.15m 4m smollm2] [--concurrency 16 64] [--max-tokens 16]
The last line printed is one JSON object with the ratios.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, cast

import torch

import games  # noqa: F401  (registers the catalog)
from backends.embedded import embedded_model_dir
from backends.hf import HFBackend
from backends.tiny import PresetName, build_tiny_model
from tsmg.episode import Episode
from tsmg.lap import LAP, LAPConfig
from tsmg.rollout import rollout

GAME = "FrozenLake-NoSlip-v0"
Batch = tuple[torch.Tensor, torch.Tensor, int]  # left-padded prompt ids, attention mask, new tokens


def timed(run: Callable[[], Any]) -> tuple[float, Any]:
    """Wall time of one run, and its result."""
    started = time.perf_counter()
    result = run()
    return time.perf_counter() - started, result


def ours_and_raw(
    repeats: int,
    ours: Callable[[], list[Episode]],
    raw_batches: Callable[[list[Episode]], list[Batch]],
    backend: HFBackend,
) -> tuple[float, float, list[Episode]]:
    """Best times of our rollout and of raw ``generate`` on its prompts, runs interleaved.

    Interleaving (ours, raw, ours, raw, ...) and keeping each side's best run keeps a burst of
    load from another process from landing on one side only.
    """
    ours_s, episodes = timed(ours)
    batches = raw_batches(episodes)
    raw_s, _ = timed(lambda: raw_generate(backend, batches))
    for _ in range(repeats - 1):
        ours_s = min(ours_s, timed(ours)[0])
        raw_s = min(raw_s, timed(lambda: raw_generate(backend, batches))[0])
    return ours_s, raw_s, episodes


def play(lap: LAP, seeds: Sequence[int], max_concurrent: int) -> list[Episode]:
    return rollout(GAME, lap, seeds=list(seeds), max_concurrent=max_concurrent)


def completion_tokens(episodes: Sequence[Episode]) -> int:
    return sum(step.completion_tokens or 0 for episode in episodes for step in episode.steps)


def rounds_of(backend: HFBackend, episodes: Sequence[Episode]) -> list[Batch]:
    """Per round: left-padded prompt ids, attention mask and the longest completion (tokens)."""
    by_round: dict[int, list[tuple[list[int], int]]] = defaultdict(list)
    for episode in episodes:
        for step in episode.steps:
            messages = [message.model_dump() for message in step.prompt or ()]
            ids = backend.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            prompt = backend.tokenizer(ids, add_special_tokens=False)["input_ids"]
            by_round[step.round].append((prompt, step.completion_tokens or 1))
    batches = []
    for _, rows in sorted(by_round.items()):
        width = max(len(prompt) for prompt, _ in rows)
        ids = torch.tensor([[backend.pad_id] * (width - len(p)) + p for p, _ in rows])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p, _ in rows])
        batches.append((ids, mask, max(tokens for _, tokens in rows)))
    return batches


def raw_generate(backend: HFBackend, batches: Sequence[Batch]) -> None:
    """``model.generate`` on each batch, sampling exactly the given number of new tokens."""
    with torch.inference_mode():
        for ids, mask, new_tokens in batches:
            backend.model.generate(
                input_ids=ids,
                attention_mask=mask,
                do_sample=True,
                temperature=1.0,
                top_p=1.0,
                top_k=0,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                pad_token_id=backend.pad_id,
            )


def one_at_a_time(batches: Sequence[Batch]) -> list[Batch]:
    singles = []
    for ids, mask, new_tokens in batches:
        for row in range(ids.shape[0]):
            keep = mask[row].bool()
            singles.append((ids[row, keep][None], mask[row, keep][None], new_tokens))
    return singles


def same_episodes(first: Sequence[Episode], second: Sequence[Episode]) -> bool:
    return all(
        [step.token_ids for step in a.steps] == [step.token_ids for step in b.steps]
        for a, b in zip(first, second, strict=True)
    )


def measure(preset: str, args: argparse.Namespace, folder: str) -> dict[str, Any]:
    if preset == "smollm2":
        backend = HFBackend(embedded_model_dir())
        label = "SmolLM2-135M-Instruct"
    else:
        backend = HFBackend(build_tiny_model(f"{folder}/{preset}", preset=cast(PresetName, preset)))
        label = f"tiny Llama {preset}"
    parameters = sum(p.numel() for p in backend.model.parameters())
    lap = LAP(backend, LAPConfig(max_tokens=args.max_tokens, temperature=1.0, seed=args.seed))
    print(f"\n== {label} ({parameters / 1e6:.2f}M parameters), {GAME}, {args.max_tokens} new tokens")
    play(lap, range(4), 4)  # warm up

    single_seeds = range(args.single_episodes)
    ours_single_s, raw_single_s, single_episodes = ours_and_raw(
        args.repeats,
        lambda: play(lap, single_seeds, 1),
        lambda episodes: one_at_a_time(rounds_of(backend, episodes)),
        backend,
    )
    single_tokens = completion_tokens(single_episodes)
    singles = sum(len(episode.steps) for episode in single_episodes)
    ours_single = single_tokens / ours_single_s
    raw_single = single_tokens / raw_single_s
    prompt_tokens = sum(s.prompt_tokens or 0 for e in single_episodes for s in e.steps) / max(singles, 1)
    print(f"prompts: {prompt_tokens:.0f} tokens on average")
    print(f"one at a time ({singles} turns):  ours {ours_single:8.0f} tok/s   raw generate {raw_single:8.0f} tok/s")

    results: dict[str, Any] = {"parameters": parameters, "ours_single_tok_s": round(ours_single, 1)}
    for concurrency in args.concurrency:
        ours_s, raw_s, episodes = ours_and_raw(
            args.repeats,
            partial(play, lap, range(concurrency), concurrency),
            lambda episodes: rounds_of(backend, episodes),
            backend,
        )
        tokens = completion_tokens(episodes)
        rounds = max(episode.num_rounds for episode in episodes)
        ours, raw = tokens / ours_s, tokens / raw_s
        ratio_a = ours / raw
        our_gain, raw_gain = ours / ours_single, raw / raw_single
        ratio_b = our_gain / raw_gain
        replay = same_episodes(episodes[: len(single_episodes)], single_episodes)
        print(
            f"{concurrency:3d} episodes at once ({rounds} rounds, {tokens} tokens): "
            f"ours {ours:8.0f} tok/s   raw batched generate {raw:8.0f} tok/s   a = {ratio_a:.2f}"
        )
        print(
            f"    batching gain: ours {our_gain:.2f}x, raw generate {raw_gain:.2f}x   b = {ratio_b:.2f}   "
            f"same episodes batched and one at a time: {replay}"
        )
        results[str(concurrency)] = {
            "a": round(ratio_a, 3),
            "b": round(ratio_b, 3),
            "ours_tok_s": round(ours, 1),
            "raw_tok_s": round(raw, 1),
            "our_gain": round(our_gain, 2),
            "raw_gain": round(raw_gain, 2),
            "same_episodes": replay,
        }
    return results


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--presets",
        nargs="+",
        default=["0.15m", "4m"],
        choices=["0.15m", "4m", "smollm2"],
        help="Tiny model presets, or smollm2 (the embedded SmolLM2-135M-Instruct; slow on CPU).",
    )
    parser.add_argument("--concurrency", nargs="+", type=int, default=[16, 64])
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--single-episodes", type=int, default=4, help="Episodes timed one at a time.")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: leave torch's default).")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch threads: {torch.get_num_threads()}")
    with tempfile.TemporaryDirectory() as folder:
        figures = {preset: measure(preset, args, folder) for preset in args.presets}
    summary = {
        "bench": "rollout_speed",
        "game": GAME,
        "max_tokens": args.max_tokens,
        "threads": torch.get_num_threads(),
        **{
            f"{preset}_{concurrency}": {
                key: figures[preset][str(concurrency)][key] for key in ("a", "b", "our_gain", "raw_gain")
            }
            for preset in args.presets
            for concurrency in args.concurrency
        },
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
