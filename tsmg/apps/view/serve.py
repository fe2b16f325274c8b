"""``tsmg view --serve``: the report folder over HTTP on loopback (the report also opens from disk)."""

from __future__ import annotations

import functools
import http.server
from pathlib import Path


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files without a log line per request (a report loads many chunks)."""

    def log_message(self, format: str, *args: object) -> None:
        return


def make_server(folder: Path, port: int = 8000) -> http.server.ThreadingHTTPServer:
    """An HTTP server for ``folder`` bound to 127.0.0.1 (port 0: any free port)."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
