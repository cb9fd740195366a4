"""A small stdlib client for an OpenAI-compatible completions server (vLLM's api_server): list
models, tokenize, score a token-id prompt. Requests are timed and their bytes counted; failures
are one-line RemoteErrors; replies are bounded in size and time (docs/remote.md)."""
from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass

from specdec_core.errors import BackendError


MAX_REPLY_BYTES = int(float(os.environ.get("SPECSCOPE_CLOUD_MAX_REPLY_MB", "16")) * 2**20)
CHUNK = 64 * 1024


class RemoteError(BackendError):
    """One line of ours; `detail`: what the remote said, for the server's log only."""

    def __init__(self, message: str, detail: str = ""):
        super().__init__(message)
        self.detail = detail


@dataclass
class Reply:
    data: dict
    seconds: float      # request sent -> reply read
    bytes_up: int
    bytes_down: int


@dataclass
class Row:
    """The cloud's view of one position: the supplied token's rank and logprob, and its top-1."""
    rank: int
    logprob: float
    top_id: int
    top_logprob: float


class CompletionsClient:
    def __init__(self, url: str, timeout: float = 30.0):
        u = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
        if u.scheme not in ("http", "https") or not u.hostname:
            raise RemoteError(f"cloud URL must look like http://HOST:PORT, got {url!r}")
        self.url = f"{u.scheme}://{u.netloc}"
        self.scheme, self.host = u.scheme, u.hostname
        try:
            self.port = u.port or (443 if u.scheme == "https" else 80)
        except ValueError:
            raise RemoteError(f"cloud URL has a bad port: {url!r}") from None
        self.timeout = float(timeout)
        self._conn: http.client.HTTPConnection | None = None

    # -- HTTP ---------------------------------------------------------------------------------
    def request(self, method: str, path: str, body: dict | None = None) -> Reply:
        payload = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if body is not None:
            headers["Content-Length"] = str(len(payload))
        reused = self._conn is not None
        try:
            return self._send(method, path, payload, headers)
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
            self.close()
            if not reused:            # a fresh connection failed: the server went away
                raise RemoteError(self._say(e)) from None
        try:                          # a kept-alive connection was closed by the server: once more
            return self._send(method, path, payload, headers)
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise RemoteError(self._say(e)) from None

    def _send(self, method, path, payload, headers) -> Reply:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
            self._conn = cls(self.host, self.port, timeout=self.timeout)
        conn, self._expired = self._conn, False
        watchdog = threading.Timer(self.timeout, self._expire, (conn,))
        watchdog.daemon = True
        t0 = time.perf_counter()
        watchdog.start()
        try:
            conn.request(method, path, body=payload or None, headers=headers)
            resp = conn.getresponse()
            raw = self._read_body(resp)
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
            if self._expired:
                self.close()
                raise RemoteError(self._say(TimeoutError())) from None
            raise e
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise RemoteError(self._say(TimeoutError() if self._expired else e)) from None
        finally:
            watchdog.cancel()
        dt = time.perf_counter() - t0
        up = (len(f"{method} {path} HTTP/1.1\r\n") + len(f"Host: {self.host}:{self.port}\r\n")
              + len("Accept-Encoding: identity\r\n")
              + sum(len(f"{k}: {v}\r\n") for k, v in headers.items()) + 2 + len(payload))
        down = (len(f"HTTP/1.1 {resp.status} {resp.reason}\r\n")
                + sum(len(f"{k}: {v}\r\n") for k, v in resp.getheaders()) + 2 + len(raw))
        if resp.will_close:
            self.close()
        try:
            data = json.loads(raw) if raw else {}
        except (ValueError, RecursionError):
            raise RemoteError(f"cloud server {self.url} sent a reply that is not JSON "
                              f"(HTTP {resp.status})") from None
        if resp.status >= 400:
            hint = _STATUS_HINT.get(500 if resp.status >= 500 else resp.status, "")
            raise RemoteError(f"cloud server {self.url} answered HTTP {resp.status} to {path}{hint}",
                              detail=_error_text(data))
        return Reply(data, dt, up, down)

    def _read_body(self, resp) -> bytes:
        """The reply body, refused once it passes MAX_REPLY_BYTES (said or streamed)."""
        limit = MAX_REPLY_BYTES
        try:
            said = int(resp.getheader("Content-Length") or -1)
        except ValueError:
            said = -1
        if said > limit:
            self.close()
            raise RemoteError(self._too_large(limit))
        parts, n = [], 0
        while True:
            part = resp.read(CHUNK)      # at most CHUNK; the watchdog bounds its wait
            if not part:
                if self._expired:            # the watchdog shut the socket: EOF reads as b""
                    raise TimeoutError()
                if said > n:
                    raise http.client.IncompleteRead(b"", said - n)
                return b"".join(parts)
            n += len(part)
            if n > limit:
                self.close()
                raise RemoteError(self._too_large(limit))
            parts.append(part)

    def _too_large(self, limit: int) -> str:
        return (f"cloud server {self.url} sent a reply over {limit / 2**20:g} MiB "
                f"(SPECSCOPE_CLOUD_MAX_REPLY_MB); refused")

    def _expire(self, conn) -> None:
        """The watchdog: the request ran out of time; shut its socket so a blocked read ends."""
        self._expired = True
        sock = getattr(conn, "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _say(self, e: BaseException) -> str:
        """A fixed one-line message per kind of failure; never the remote's (or the OS's) text."""
        if isinstance(e, (socket.timeout, TimeoutError)):
            return f"cloud server {self.url} did not answer within {self.timeout:g} s"
        if isinstance(e, ConnectionRefusedError):
            return (f"cloud server {self.url} is not reachable (connection refused); "
                    f"start it with `make cloud` or check --cloud-url")
        if isinstance(e, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)):
            return f"cloud server {self.url} closed the connection (did it stop?)"
        if isinstance(e, socket.gaierror):
            return f"cloud server {self.url}: unknown host {self.host!r}"
        if isinstance(e, http.client.IncompleteRead):
            return f"cloud server {self.url} closed the connection in the middle of a reply (did it stop?)"
        if isinstance(e, http.client.HTTPException):
            return f"cloud server {self.url} sent a reply that is not valid HTTP ({type(e).__name__})"
        return f"cloud server {self.url}: could not connect ({type(e).__name__})"

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- the calls ----------------------------------------------------------------------------
    def models(self) -> list[dict]:
        data = self.request("GET", "/v1/models").data
        models = data.get("data") if isinstance(data, dict) else None
        if not isinstance(models, list):
            raise RemoteError(f"cloud server {self.url} is not an OpenAI-compatible server "
                              f"(/v1/models lists no models)")
        return models

    def tokenize(self, model: str, text: str) -> list[int]:
        data = self.request("POST", "/tokenize", {"model": model, "prompt": text,
                                                  "add_special_tokens": False}).data
        if not isinstance(data.get("tokens"), list):
            raise RemoteError(f"cloud server {self.url} has no /tokenize (is it vLLM?)")
        return [int(t) for t in data["tokens"]]

    def score(self, model: str, ids: list[int], n_rows: int, k: int = 1) -> tuple[list[Row], int, float, Reply]:
        """One /v1/completions request over `ids`: the rows of the last n_rows prompt positions
        (row j: the model's view of ids[-n_rows + j]) and the greedy next token after all ids
        with its logprob. k: top-k asked per position (1 is all greedy and rank verification need)."""
        body = {"model": model, "prompt": ids, "max_tokens": 1, "temperature": 0.0,
                "prompt_logprobs": k, "logprobs": k, "return_tokens_as_token_ids": True,
                "repetition_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}
        reply = self.request("POST", "/v1/completions", body)
        try:
            choice = reply.data["choices"][0]
            plp = choice["prompt_logprobs"]
            rows = [_row(plp[len(ids) - n_rows + j], ids[len(ids) - n_rows + j]) for j in range(n_rows)]
            lp = choice["logprobs"]
            nxt = int(str(lp["tokens"][0]).removeprefix("token_id:"))
            nxt_lp = float(lp["token_logprobs"][0])
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            raise RemoteError(f"cloud server {self.url} sent completions without prompt logprobs "
                              f"(needs vLLM's prompt_logprobs)") from None
        return rows, nxt, nxt_lp, reply


def _row(entry: dict, token: int) -> Row:
    own = entry[str(token)]
    top_key = min(entry, key=lambda t: entry[t]["rank"])
    return Row(int(own["rank"]), float(own["logprob"]), int(top_key), float(entry[top_key]["logprob"]))


_STATUS_HINT = {
    400: " (it refused the request; its log says why)", 422: " (it refused the request; its log says why)",
    401: " (it wants credentials)", 403: " (it wants credentials)",
    404: " (no such endpoint or model: is it vLLM's OpenAI server?)",
    500: " (a server error; its log says why)",
}


def _error_text(data) -> str:
    msg = data.get("message") if isinstance(data, dict) else None
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        msg = data["error"].get("message") or msg
    if isinstance(data, dict) and isinstance(data.get("detail"), str):
        msg = msg or data["detail"]
    lines = [ln.strip() for ln in str(msg or data).splitlines() if ln.strip()]
    return "".join(c if c.isprintable() else "?" for c in (lines[0] if lines else "no message")[:300])
