"""tsmg games inside other trainers.

Each module is a thin adapter and imports its library only when imported itself, so ``import
tsmg`` stays light:

* :mod:`tsmg.apps.integrations.trl`: TRL's ``GRPOTrainer`` trains on any tsmg game (``rollout_func``
  driven by tsmg's rollout engine, on the trainer's model or TRL's colocated vLLM engine; or
  ``environment_factory``, TRL playing through a ``make_move`` tool, tsmg keeping the records);
* :mod:`tsmg.apps.integrations.skyrl`: any tsmg game as a SkyRL-gym ``BaseTextEnv``;
* :mod:`tsmg.apps.integrations.verifiers`: any tsmg game as a verifiers multi-turn environment
  (``load_environment``);
* :mod:`tsmg.apps.integrations.seat`: what those two share: one seat played turn by turn by a model
  the trainer calls, the other seats by a script;
* :mod:`tsmg.apps.integrations.conversation`: an episode as one growing token sequence, the shape of
  the data trainers that train on whole episodes take.

Token-exact exports of a run's episodes for other trainers are :mod:`tsmg.export`.
"""
