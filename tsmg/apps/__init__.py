"""The applications, the top layer: what users run on top of the kernel, the games, the backends and training.

The command line (:mod:`tsmg.apps.cli`, with the parser every command shares,
:mod:`tsmg.apps.cli_parser`), evaluation (:mod:`tsmg.apps.evaluation`), the viewer
(:mod:`tsmg.apps.view`), serving and its client (:mod:`tsmg.apps.serve`, :mod:`tsmg.apps.remote`),
the integrations with other trainers (:mod:`tsmg.apps.integrations`) and the training commands
(:mod:`tsmg.apps.train`). Nothing below imports from here or names it.
"""
