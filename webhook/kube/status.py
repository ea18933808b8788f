"""The words of the API server's Status answers, for messages people read (the placer's refused
writes, the labeler's refused labels): one line, never the HTTP headers an ApiException prints."""

from __future__ import annotations

import json


def status_words(code: int, body: object) -> str:
    """The words of a Status answer: its message, then its causes' messages where they add to
    it (a PodDisruptionBudget names itself in a cause); `HTTP code` when the body has none."""
    try:
        status = json.loads(body) if isinstance(body, str | bytes) else {}
    except ValueError:
        status = {}
    status = status if isinstance(status, dict) else {}
    first = str(status.get("message") or ("TooManyRequests" if code == 429 else f"HTTP {code}"))
    causes = [
        str(c.get("message"))
        for c in (status.get("details") or {}).get("causes") or []
        if isinstance(c, dict) and c.get("message") and str(c.get("message")) not in first
    ]
    return "; ".join([first, *causes])
