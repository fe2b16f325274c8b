"""The training commands: `tsmg train`, `tsmg sft` (:mod:`.cli`, :mod:`.sft_cli`), `tsmg demo`, `tsmg export`.

The trainer itself is the ``training`` package below; these are its command lines.
"""
