"""One client for OpenAI-compatible servers (vLLM's api_server), over httpx: list models,
tokenize, score a token-id prompt, any JSON request. Requests are timed and their bytes counted;
failures are one-line RemoteErrors; replies are bounded in size and in total time (docs/remote.md)."""
from __future__ import annotations

import json
import os
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass

import httpx

from specdec_core.backends.cloud_policy import canonical
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


class _Cut(Exception):
    """The connection ended: `midway` once the reply's headers were read."""

    def __init__(self, midway: bool, cause: BaseException):
        self.midway, self.cause = midway, cause


class CompletionsClient:
    """`role` and `hint` word the messages: "cloud server ..." for the remote cloud (start it
    with `make cloud`), "served engine ..." for an audit."""

    def __init__(self, url: str, timeout: float = 30.0, role: str = "cloud server",
                 hint: str = "start it with `make cloud` or check --cloud-url"):
        self.role, self.hint = role, hint
        try:                # scheme://host:port, the one reading of a URL (cloud_policy's)
            self.url = canonical(url)
        except ValueError:
            raise RemoteError(f"{role} URL must look like http://HOST:PORT, got {url!r}") from None
        self.host = urllib.parse.urlsplit(self.url).hostname
        self.timeout = float(timeout)
        self._http: httpx.Client | None = None
        self._stream = None            # the network stream of the one pooled connection
        self._served = 0               # replies read on the current connection pool

    # -- HTTP ---------------------------------------------------------------------------------
    def request(self, method: str, path: str, body: dict | None = None) -> Reply:
        payload = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        while True:     # a kept-alive connection closed by the server: once more, on a fresh one
            reused = self._served > 0
            try:
                return self._send(method, path, payload)
            except _Cut as e:
                self.close()               # (close() makes the next try a fresh connection)
                if e.midway or not reused:     # a fresh connection failed: the server went away
                    raise RemoteError(self._say(e.cause, e.midway)) from None

    def _client(self) -> httpx.Client:
        if self._http is None:
            self._http = httpx.Client(base_url=self.url, timeout=self.timeout, trust_env=False,
                                      limits=httpx.Limits(max_connections=1, max_keepalive_connections=1))
        return self._http

    def _trace(self, event: str, info: dict) -> None:
        if event == "connection.connect_tcp.complete":
            self._stream = info.get("return_value")

    def _send(self, method: str, path: str, payload: bytes) -> Reply:
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "Accept-Encoding": "identity"}
        self._expired, midway = False, False
        watchdog = threading.Timer(self.timeout, self._expire)
        watchdog.daemon = True
        t0 = time.perf_counter()
        watchdog.start()
        try:
            with self._client().stream(method, path, content=payload or None, headers=headers,
                                       extensions={"trace": self._trace}) as resp:
                midway = True
                self._stream = resp.extensions.get("network_stream", self._stream)
                raw = self._read_body(resp)
        except RemoteError:
            self.close()
            raise
        except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError) as e:
            if self._expired or isinstance(e, httpx.TimeoutException):
                self.close()
                raise RemoteError(self._say(TimeoutError())) from None
            raise _Cut(midway, e) from None
        except (httpx.HTTPError, OSError) as e:
            self.close()
            raise RemoteError(self._say(e)) from None
        finally:
            watchdog.cancel()
        dt = time.perf_counter() - t0
        self._served += 1
        req = resp.request
        up = (len(f"{method} {path} HTTP/1.1\r\n") + sum(len(k) + len(v) + 4 for k, v in req.headers.raw)
              + 2 + len(payload))
        down = (len(f"HTTP/1.1 {resp.status_code} {resp.reason_phrase}\r\n")
                + sum(len(k) + len(v) + 4 for k, v in resp.headers.raw) + 2 + len(raw))
        try:
            kind = resp.headers.get("content-type", "")
            if kind.startswith("text/event-stream"):       # a stream: its events
                data = {"events": [json.loads(ln[6:]) for ln in raw.splitlines()
                                   if ln.startswith(b"data: ") and ln != b"data: [DONE]"]}
            elif kind.startswith("text/plain") and resp.status_code < 400:   # e.g. /metrics
                data = {"text": raw.decode("utf-8", "replace")}
            else:
                data = json.loads(raw) if raw else {}
        except (ValueError, RecursionError):
            raise RemoteError(f"{self.role} {self.url} sent a reply that is not JSON "
                              f"(HTTP {resp.status_code})") from None
        if resp.status_code >= 400:
            hint = _STATUS_HINT.get(500 if resp.status_code >= 500 else resp.status_code, "")
            raise RemoteError(f"{self.role} {self.url} answered HTTP {resp.status_code} to {path}{hint}",
                              detail=_error_text(data))
        return Reply(data, dt, up, down)

    def _read_body(self, resp: httpx.Response) -> bytes:
        """The reply body, refused once it passes MAX_REPLY_BYTES (said or streamed)."""
        limit = MAX_REPLY_BYTES
        try:
            said = int(resp.headers.get("Content-Length") or -1)
        except ValueError:
            said = -1
        if said > limit:
            raise RemoteError(self._too_large(limit))
        parts, n = [], 0
        for part in resp.iter_raw(CHUNK):      # the watchdog bounds the wait for each part
            n += len(part)
            if n > limit:
                raise RemoteError(self._too_large(limit))
            parts.append(part)
        if self._expired:
            raise httpx.ReadTimeout("expired")
        return b"".join(parts)

    def _too_large(self, limit: int) -> str:
        return (f"{self.role} {self.url} sent a reply over {limit / 2**20:g} MiB "
                f"(SPECSCOPE_CLOUD_MAX_REPLY_MB); refused")

    def _expire(self) -> None:
        """The watchdog: the request ran out of time; shut its socket so a blocked read ends."""
        self._expired = True
        sock = self._stream.get_extra_info("socket") if self._stream is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _say(self, e: BaseException, midway: bool = False) -> str:
        """A fixed one-line message per kind of failure; never the remote's (or the OS's) text."""
        at = f"{self.role} {self.url}"
        root = e
        while root.__cause__ is not None or root.__context__ is not None:
            root = root.__cause__ or root.__context__
        if isinstance(e, TimeoutError) or isinstance(root, (socket.timeout, TimeoutError)):
            return f"{at} did not answer within {self.timeout:g} s"
        if isinstance(root, ConnectionRefusedError):
            return f"{at} is not reachable (connection refused); {self.hint}"
        if isinstance(root, socket.gaierror):
            return f"{at}: unknown host {self.host!r}"
        if midway:
            return f"{at} closed the connection in the middle of a reply (did it stop?)"
        if isinstance(root, (ConnectionResetError, BrokenPipeError)) or "disconnected" in str(e):
            return f"{at} closed the connection (did it stop?)"
        if isinstance(e, httpx.RemoteProtocolError):
            return f"{at} sent a reply that is not valid HTTP"
        return f"{at}: could not connect ({type(root).__name__})"

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http, self._stream, self._served = None, None, 0

    # -- the calls ----------------------------------------------------------------------------
    def models(self) -> list[dict]:
        data = self.request("GET", "/v1/models").data
        models = data.get("data") if isinstance(data, dict) else None
        if not isinstance(models, list):
            raise RemoteError(f"{self.role} {self.url} is not an OpenAI-compatible server "
                              f"(/v1/models lists no models)")
        return models

    def tokenize(self, model: str, text: str) -> list[int]:
        data = self.request("POST", "/tokenize", {"model": model, "prompt": text,
                                                  "add_special_tokens": False}).data
        if not isinstance(data.get("tokens"), list):
            raise RemoteError(f"{self.role} {self.url} has no /tokenize (is it vLLM?)")
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
            nxt = token_id(lp["tokens"][0])
            nxt_lp = float(lp["token_logprobs"][0])
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            raise RemoteError(f"{self.role} {self.url} sent completions without prompt logprobs "
                              f"(needs vLLM's prompt_logprobs)") from None
        return rows, nxt, nxt_lp, reply


def token_id(t) -> int:
    """A token of a reply asked with return_tokens_as_token_ids ("token_id:123") as its id."""
    return int(str(t).removeprefix("token_id:"))


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
