"""How the catalog's games treat an invalid answer where they follow the MS-GRPO authors' code.

Its own module (re-exported by :mod:`games`) so that the registration modules, which
:mod:`games` imports, need not import :mod:`games` back.
"""

#: How the MS-GRPO authors' code treats an invalid answer: the first action is played, and a
#: format penalty applies (0 in their evaluation, 1 in training). No forfeit.
MS_GRPO_INVALID = {"on_invalid": "default_action", "invalid_penalty": 0.0, "forfeit_after": None}
