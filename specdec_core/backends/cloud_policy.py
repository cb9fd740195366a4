"""Who may point the app's remote cloud where (issue 30). Pure functions of the environment: an
operator's allowlist `SPECSCOPE_CLOUD_URLS`, free-form only on a loopback server or with
`SPECSCOPE_ALLOW_ANY_CLOUD_URL=1`, otherwise refused (docs/remote.md, "Offering a cloud server")."""
from __future__ import annotations

import ipaddress
import os
import urllib.parse
from dataclasses import dataclass

from specdec_core.errors import UserError

ENV_URLS = "SPECSCOPE_CLOUD_URLS"
ENV_ANY = "SPECSCOPE_ALLOW_ANY_CLOUD_URL"
NONE = "none"
# app.py serves where launch_kwargs() says: GRADIO_SERVER_NAME, default 0.0.0.0 (every interface)
DEFAULT_SERVER_NAME = "0.0.0.0"
_TRUE = ("1", "true", "yes", "on")


class CloudURLRefused(UserError):
    """A cloud server URL this app will not connect to (said before any connection)."""


def canonical(url: str) -> str:
    """scheme://host:port of an http(s) URL (host lower-cased, default port filled in), the
    address a client connects to; raises ValueError for anything else (user@, no host, bad port)."""
    text = (url or "").strip()
    u = urllib.parse.urlsplit(text if "://" in text else f"http://{text}")
    if u.scheme not in ("http", "https") or not u.hostname or "@" in u.netloc:
        raise ValueError(f"not an http(s)://HOST:PORT address: {text!r}")
    port = u.port or (443 if u.scheme == "https" else 80)    # u.port raises ValueError itself
    host = u.hostname.lower()
    return f"{u.scheme}://{'[' + host + ']' if ':' in host else host}:{port}"


def is_loopback(host: str | None) -> bool:
    """127.0.0.0/8, ::1 and localhost (no name lookup: other names are not loopback)."""
    h = (host or "").strip().strip("[]").lower()
    if h in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def served_locally(env=None) -> tuple[bool, str]:
    """(True, "") when only this machine can reach the page; else (False, why)."""
    env = os.environ if env is None else env
    name = env.get("GRADIO_SERVER_NAME") or DEFAULT_SERVER_NAME
    if env.get("SPACE_ID"):
        return False, "this app runs as a Hugging Face Space"
    if str(env.get("GRADIO_SHARE", "")).lower() == "true":
        return False, "this app is shared through a public link (GRADIO_SHARE)"
    if not is_loopback(name):
        return False, f"this app serves the network ({name})"
    return True, ""


@dataclass(frozen=True)
class CloudPolicy:
    allowlist: tuple[str, ...] = ()   # the operator's servers, as written
    free_form: bool = False           # any URL (local use, or the operator said so)
    why: str = ""                     # one line for the page: what the field offers, or why not

    @property
    def mode(self) -> str:
        return "list" if self.allowlist else ("free" if self.free_form else "off")

    def choices(self) -> list[str]:
        return [NONE, *self.allowlist]

    def resolve(self, value) -> str | None:
        """The URL to connect to for `value` from the page or an API call, or None (the cloud in
        the process). Anything this policy does not allow raises CloudURLRefused, one line."""
        text = "" if value is None else str(value).strip()
        if not text or text.lower() == NONE:
            return None
        if self.allowlist:
            key = _key(text)
            for entry in self.allowlist:
                if text == entry or (key is not None and key == _key(entry)):
                    return entry            # the operator's URL, never the visitor's spelling
            raise CloudURLRefused("this server verifies only on the cloud servers its operator "
                                  f"listed ({ENV_URLS}); pick one of them or none")
        if self.free_form:
            return text
        raise CloudURLRefused(f"cloud server URLs are off on this server: {self.why}")


def cloud_policy(env=None) -> CloudPolicy:
    """The policy the environment sets (see the module doc). A malformed allowlist entry is the
    operator's error: ValueError naming it, so the app does not start half-configured."""
    env = os.environ if env is None else env
    entries = [e.strip().rstrip("/") for e in (env.get(ENV_URLS) or "").split(",") if e.strip()]
    for e in entries:
        try:
            canonical(e)
        except ValueError:
            raise ValueError(f"{ENV_URLS}: {e!r} is not an http(s)://HOST:PORT address") from None
    if entries:
        return CloudPolicy(tuple(dict.fromkeys(entries)), False,
                           "the cloud servers this app's operator offers; none: the cloud in the process")
    if str(env.get(ENV_ANY, "")).strip().lower() in _TRUE:
        return CloudPolicy((), True, f"any server ({ENV_ANY} is set)")
    local, why = served_locally(env)
    if local:
        return CloudPolicy((), True, "local use: any server this machine reaches")
    return CloudPolicy((), False, f"{why}, so its operator chooses the cloud servers ({ENV_URLS})")


def _key(entry: str) -> str | None:
    """canonical(entry), None where it is not an http(s) address."""
    try:
        return canonical(entry)
    except ValueError:
        return None
