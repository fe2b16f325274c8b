"""Serve any registered game as an OpenEnv environment (``tsmg serve``); needs ``tsmg[serve]``.

* :mod:`tsmg.serve.models`: the typed action, observation and state (OpenEnv models).
* :mod:`tsmg.serve.environment`: a game as an OpenEnv ``Environment``, one per session.
* :mod:`tsmg.serve.app`: OpenEnv's server per game under ``/GAME_ID`` (or one game at the root,
  ``create_app``), plus HTTP sessions and hardened error handling.
* :mod:`tsmg.serve.limits`: what a client may ask for (opponents, game options).
* :mod:`tsmg.serve.auth`: how a client presents ``tsmg serve --token``.
* :mod:`tsmg.serve.server`: uvicorn on a bound socket.
* :mod:`tsmg.serve.client`: OpenEnv's client typed for served games.
* :mod:`tsmg.serve.project`, :mod:`tsmg.serve.project_files`: a game as an OpenEnv project
  (``tsmg serve --export-project``), and the server that project runs.
* :mod:`tsmg.serve.cli`: the ``tsmg serve`` command.

Importing this package imports nothing heavy; its modules import OpenEnv.
"""
