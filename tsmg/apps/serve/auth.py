"""The token of ``tsmg serve --token``: how a client presents it (imports nothing).

A server started with a token refuses every HTTP request and WebSocket handshake that does
not carry ``Authorization: Bearer TOKEN``. Both ends read :data:`TOKEN_ENV_VAR` when no token
is given: ``tsmg serve`` as its ``--token``, :func:`tsmg.make` for a game URL.
"""

from __future__ import annotations

import os

#: Where the server and its clients find the token when none is given explicitly.
TOKEN_ENV_VAR = "TSMG_SERVE_TOKEN"


def client_token(token: str | None = None) -> str | None:
    """``token``, else :data:`TOKEN_ENV_VAR`'s value, else None (an empty value counts as none)."""
    return token or os.environ.get(TOKEN_ENV_VAR) or None


def token_headers(token: str | None) -> dict[str, str]:
    """The HTTP headers that present ``token`` (none without one)."""
    return {"Authorization": f"Bearer {token}"} if token else {}
