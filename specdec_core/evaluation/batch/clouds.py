"""Several cloud servers for one batch (`--cloud-url A --cloud-url B`): each row goes to the
least busy server that is up (ties: round robin). A failing server is probed and marked down
(its rows fail with `retry`) and looked at again every RECHECK_S seconds (docs/scale.md)."""
from __future__ import annotations

import itertools
import time

from specdec_core.errors import UserError

RECHECK_S = 10.0
PROBE_TIMEOUT_S = 3.0


def probe(url: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None when the server at url lists its models, else the one-line reason."""
    from specdec_core.backends.openai_client import CompletionsClient

    client = CompletionsClient(url, timeout)
    try:
        client.models()
        return None
    except UserError as e:
        return str(e)
    finally:
        client.close()


class CloudPool:
    """The servers of one batch; `None` alone stands for the backend's own (local) cloud."""

    def __init__(self, urls, check: bool = True):
        from specdec_core.backends.openai_client import CompletionsClient

        # the form the client's errors name the server by (a bad URL: one-line error here)
        urls = [CompletionsClient(u.strip()).url for u in (urls or []) if u and u.strip()]
        self.urls: list[str | None] = list(dict.fromkeys(urls)) or [None]
        self.busy = dict.fromkeys(self.urls, 0)
        self.down: dict[str, float] = {}          # url -> when it was last seen down
        self.reason: dict[str, str] = {}
        self._turn = itertools.count()
        if check and self.remote:
            for url in self.urls:
                self._down_now(url)
            if len(self.down) == len(self.urls):
                raise UserError(self.reason[self.urls[0]] if len(self.urls) == 1 else
                                "no cloud server is reachable: " + "; ".join(self.reason.values()))

    @property
    def remote(self) -> bool:
        return self.urls != [None]

    def up(self) -> list[str]:
        """The servers not marked down (none for a local cloud)."""
        return [u for u in self.urls if u is not None and u not in self.down]

    def pick(self) -> tuple[str | None, str | None]:
        """(url, None) for the next row, or (None, why) when every server is down."""
        if not self.remote:
            return None, None
        now = time.monotonic()
        for url, since in list(self.down.items()):
            if now - since >= RECHECK_S and not self._down_now(url):
                self.down.pop(url)
        up = [u for u in self.urls if u not in self.down]
        if not up:
            return None, "no cloud server is reachable: " + "; ".join(self.reason.values())
        turn = next(self._turn)
        order = up[turn % len(up):] + up[:turn % len(up)]
        url = min(order, key=lambda u: self.busy[u])
        self.busy[url] += 1
        return url, None

    def done(self, url: str | None, row: dict) -> None:
        """A row on url finished. When it failed because the server is down, the server is
        marked down and the row `retry` (it runs again on --resume)."""
        if url is None:
            return
        self.busy[url] = max(0, self.busy[url] - 1)
        if not row.get("ok") and url in str(row.get("error") or "") and self._down_now(url):
            row["retry"] = True

    def _down_now(self, url: str) -> bool:
        """Probe url; when it does not answer, mark it down (now, with the reason) and say so."""
        why = probe(url)
        if why:
            self.down[url] = time.monotonic()
            self.reason[url] = why
        return bool(why)
