"""Serve any registered game as an OpenEnv environment (``tsmg serve``); needs ``tsmg[serve]``.

* :mod:`tsmg.apps.serve.models`: the typed action, observation and state (OpenEnv models).
* :mod:`tsmg.apps.serve.environment`: a game as an OpenEnv ``Environment``, one per session.
* :mod:`tsmg.apps.serve.app`: OpenEnv's server per game under ``/GAME_ID`` (or one game at the root,
  ``create_app``), plus HTTP sessions and hardened error handling.
* :mod:`tsmg.apps.serve.limits`: what a client may ask for (opponents, game options).
* :mod:`tsmg.apps.serve.auth`: how a client presents ``tsmg serve --token``.
* :mod:`tsmg.apps.serve.server`: uvicorn on a bound socket.
* :mod:`tsmg.apps.serve.client`: OpenEnv's client typed for served games.
* :mod:`tsmg.apps.serve.project`, :mod:`tsmg.apps.serve.project_files`: a game as an OpenEnv project
  (``tsmg serve --export-project``), and the server that project runs.
* :mod:`tsmg.apps.serve.cli`: the ``tsmg serve`` command.

Importing this package imports nothing heavy; its modules import OpenEnv.
"""
