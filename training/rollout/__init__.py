"""The rollout machinery: how each update's episodes are played, from which seeds, seats and weights.

Everything that turns "update u needs episodes" into a batch of finished episode records lives
here, with the one decision that belongs to how they were played: which of their steps train
(a tree's shared prefix once, an RTPO stage's turn). Scoring them, drawing among them and
updating on them is the rest of :mod:`training` (annotators, credit, sampling, losses, the
update). What belongs, by what it does:

* :mod:`~training.rollout.engines` -- who plays: the trained HF model, its merged LoRA copy or a
  vLLM engine, behind :class:`~training.rollout.engines.RolloutEngine`;
* :mod:`~training.rollout.vllm_sync` -- keeping a vLLM engine on the trainer's weights (the engine's
  half of the sync, so it sits with the engine);
* :mod:`~training.rollout.sources` -- what is played for update u (groups of seeds, trees) and which
  steps of it train; :mod:`~training.rollout.tree`, :mod:`~training.rollout.rtpo` and
  :mod:`~training.rollout.async_loop` are the other shapes and timings of a rollout (branched
  groups, RTPO's reverse-turn stages, a worker playing ahead), and :mod:`~training.rollout.build`
  picks one from the configuration;
* :mod:`~training.rollout.dynamic_sampling` -- DAPO's refill, which plays new groups until the
  update has enough with signal (it plays episodes, so it is rollout, not sampling:
  :mod:`training.sampling` only draws among credited steps);
* :mod:`~training.rollout.selfplay` -- who plays the other seats (self-play, a fixed opponent, a pool).

Importing this package imports nothing (the engines need torch): import the module you use. The
old paths (``training.engines`` ...) still work and warn once (:mod:`tsmg._moved`).
"""
