"""Prompt-prefix sharing with a chat model: rollouts and training steps, with and without it.

Episodes of a game share long prompt prefixes (the chat template, the system text, the rules),
and the episodes of a group often stand in the same state. Three things are measured on the
embedded SmolLM2-135M-Instruct with a LoRA adapter (bfloat16, one thread, Frozen Lake prompts):

0. **Output layer**: the vocabulary projection of the last position over a strided view of the
   hidden states (what asking transformers for the last logits by count does) against the
   position gathered into a contiguous tensor (what the backends ask for): bfloat16 matmuls
   over strided views take a slow CPU path.
1. **Rollout round**: one batched constrained-choice ``generate`` over ``--rows`` prompts of
   which ``--distinct`` differ (identical prompts are prefilled once), against the same rows
   all made distinct by a per-row tag at the end of the prompt (so every row is prefilled).
2. **Training step**: forward and backward of ``--rows`` training samples through
   :func:`backends.scoring.score_completions` with ``share_prefix=True`` (the common prefix runs
   once) and ``False`` (every row runs its whole prompt), the same numbers either way.

Usage: python bench/prefix_sharing.py [--rows 32] [--distinct 8] [--repeats 3]
The last line printed is one JSON object with the headline figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

ACTIONS = ["left", "down", "right", "up"]


def median_seconds(work: Callable[[], Any], repeats: int) -> float:
    """Median wall time of ``work()`` over ``repeats`` runs (after one warm-up run)."""
    work()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        work()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def frozen_lake_messages(count: int) -> list[list[dict[str, str]]]:
    """Chat prompts of ``count`` Frozen Lake states (the standard map, walked at random)."""
    import random

    import games  # noqa: F401  (registers the catalog)
    import tsmg
    from tsmg.lap import DEFAULT_SYSTEM

    game = tsmg.make("FrozenLake-Slippery-v0")  # slippery: random walks visit many states
    walker = random.Random(0)
    texts: list[str] = []
    observation = game.reset(seed=0)[0]["player"]
    while len(texts) < count:
        if observation not in texts:
            texts.append(observation)
        result = game.step({"player": walker.choice(ACTIONS)})
        observation = game.reset(seed=len(texts))[0]["player"] if result.done else result.observations["player"]
    return [[{"role": "system", "content": DEFAULT_SYSTEM}, {"role": "user", "content": text}] for text in texts]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=32, help="prompts per batch")
    parser.add_argument("--distinct", type=int, default=8, help="distinct states among them (rollout round)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    import torch

    from backends.base import GenerationRequest, SamplingParams
    from backends.embedded import embedded_model_dir
    from backends.hf import HFBackend
    from backends.scoring import MIN_SHARED_PREFIX, ChoiceMasks, score_completions, shared_prefix_length

    backend = HFBackend(str(embedded_model_dir()), dtype="bfloat16", threads=1, max_batch_size=args.rows)
    backend.add_lora(r=8, alpha=16, target_modules="all-linear", dropout=0.0)
    messages = frozen_lake_messages(args.rows)

    # 0. The output layer over the last position: a strided view (what an int logits_to_keep
    #    slices) vs the positions gathered (what the backends ask for).
    head = backend.model.get_output_embeddings().weight.detach()
    hidden = torch.randn(64, 60, head.shape[1], dtype=head.dtype)
    head_strided = median_seconds(lambda: torch.nn.functional.linear(hidden[:, -1:, :], head), 1)
    last = torch.tensor([59])
    head_gathered = median_seconds(lambda: torch.nn.functional.linear(hidden[:, last, :], head), args.repeats)

    # 1. A rollout round: repeated states vs every row distinct.
    repeated = [messages[index % args.distinct] for index in range(args.rows)]
    tagged = [
        [*prompt[:-1], {**prompt[-1], "content": prompt[-1]["content"] + f"\n#{index}"}]
        for index, prompt in enumerate(repeated)
    ]
    sampling = SamplingParams(temperature=1.0, max_tokens=4)

    def generate(prompts: list[list[dict[str, str]]]) -> None:
        backend.generate(
            [GenerationRequest(messages=p, choices=ACTIONS, seed=i) for i, p in enumerate(prompts)], sampling
        )

    round_repeated = median_seconds(lambda: generate(repeated), args.repeats)
    round_distinct = median_seconds(lambda: generate(tagged), args.repeats)

    # 2. A training step over distinct states: with and without sharing the prompt prefix.
    prompts = backend.encode_prompts([GenerationRequest(messages=p) for p in messages])
    answers = [backend.tokenizer.encode(ACTIONS[i % 4], add_special_tokens=False) for i in range(args.rows)]
    masks = ChoiceMasks(backend.choice_tries)
    model = backend.model
    model.train()

    def step(share_prefix: bool) -> None:
        model.zero_grad(set_to_none=True)
        scores = score_completions(
            model,
            prompts,
            answers,
            pad_id=backend.pad_id,
            choices=[ACTIONS] * len(answers),
            choice_masks=masks,
            share_prefix=share_prefix,
        )
        torch.where(scores.mask, scores.logprobs, torch.zeros_like(scores.logprobs)).sum().backward()

    step_shared = median_seconds(lambda: step(True), args.repeats)
    step_plain = median_seconds(lambda: step(False), args.repeats)

    prompt_tokens = statistics.mean(len(p) for p in prompts)
    shared_tokens = shared_prefix_length(prompts, MIN_SHARED_PREFIX)
    print(f"SmolLM2-135M-Instruct + LoRA r=8, bfloat16, 1 thread; Frozen Lake prompts of {prompt_tokens:.0f} tokens")
    print(
        f"output layer over the last of 60 positions, 64 rows: strided view {head_strided:.3f} s, "
        f"gathered {head_gathered:.3f} s -> x{head_strided / head_gathered:.0f}"
    )
    print(
        f"rollout round, {args.rows} rows: {args.distinct} distinct states {round_repeated:.2f} s, "
        f"every row distinct {round_distinct:.2f} s -> x{round_distinct / round_repeated:.2f}"
    )
    print(
        f"training step, {args.rows} samples sharing a {shared_tokens}-token prefix: shared {step_shared:.2f} s, "
        f"whole prompts {step_plain:.2f} s -> x{step_plain / step_shared:.2f}"
    )
    print(
        json.dumps(
            {
                "benchmark": "prefix_sharing",
                "output_layer_s": {"strided_view": round(head_strided, 4), "gathered": round(head_gathered, 4)},
                "rows": args.rows,
                "distinct_states": args.distinct,
                "prompt_tokens": round(prompt_tokens, 1),
                "shared_prefix_tokens": shared_tokens,
                "rollout_round_s": {
                    "repeated_states": round(round_repeated, 3),
                    "all_distinct": round(round_distinct, 3),
                },
                "rollout_speedup": round(round_distinct / round_repeated, 2),
                "train_step_s": {"shared_prefix": round(step_shared, 3), "whole_prompts": round(step_plain, 3)},
                "train_step_speedup": round(step_plain / step_shared, 2),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
