"""The cloud behind a server: the edge runs here, the cloud verifier behind vLLM's OpenAI API.
ONE /v1/completions request (prompt_logprobs) per verified block; greedy and rank acceptance
only (docs/remote.md)."""
from __future__ import annotations

import math
import os

from specdec_core.analysis.divergence import common_prefix
from specdec_core.backends.openai_client import CompletionsClient, RemoteError
from specdec_core.decoding.link import LinkCost
from specdec_core.decoding.sampling import Verdict
from specdec_core.errors import ConfigError

DEFAULT_TIMEOUT = float(os.environ.get("SPECSCOPE_CLOUD_TIMEOUT", "30"))


def refuse(cfg) -> None:
    """The configurations a remote cloud cannot verify exactly: one-line ConfigErrors."""
    if cfg.verify == "sampling":
        raise ConfigError("verify=sampling needs the cloud's full distribution, which a remote "
                          "cloud does not send; use verify=greedy or verify=rank with --cloud-url")
    if cfg.temperature > 0:
        raise ConfigError("a remote cloud verifies exactly at temperature 0 only (a correction at "
                          "temperature > 0 is drawn from the cloud's full distribution); "
                          "set temperature=0 with --cloud-url")
    if getattr(cfg, "link_rtt_ms", 0) or getattr(cfg, "link_uplink_kbps", 0):
        raise ConfigError("link_rtt_ms / link_uplink_kbps model the link of a local cloud; with "
                          "--cloud-url the link is measured, so set them to 0")


class RemoteCloud:
    """A backend whose cloud is served at `url`. `cloud` stays the wrapped backend's local model (if
    any), used only by the cloud-only baseline."""

    def __init__(self, base, url: str, model: str | None = None, timeout: float = DEFAULT_TIMEOUT):
        self.base, self.timeout = base, timeout
        client = CompletionsClient(url, timeout)
        self.url = client.url
        try:
            self.model, self.max_model_len = _pick_model(client, model)
            _check_vocabulary(client, self.model, base.tokenizer)
        finally:
            client.close()

    def __getattr__(self, name):          # edge, tokenizer, stop_ids, build_inputs, ...
        if name.startswith("__") or name == "base":   # copy.copy probes before __dict__ is set
            raise AttributeError(name)
        return getattr(self.base, name)

    def make_runner(self, model, role: str):
        if role == "cloud":
            return RemoteRunner(self)
        return self.base.make_runner(model, role)

    def counterfactual_inputs(self, prompt):
        """None: the served cloud cannot be asked for the audio dependence from here (the local
        model, if any, may not be the one served)."""
        return None

    def describe(self) -> dict:
        d = self.base.describe()
        d.update(cloud_params=None, cloud=f"{self.model} at {self.url}")
        return d


class RemoteRunner:
    """The cloud's side of the runner interface the decoder uses (prefill, crop, seen, history,
    forwards); there is no cache to keep, so `seen` is only what the last request scored."""

    def __init__(self, remote: RemoteCloud):
        self.remote = remote
        self.client = CompletionsClient(remote.url, remote.timeout)
        self.seen, self.history, self.forwards = 0, [], 0

    def prefill(self, prompt) -> None:
        if prompt.prefill_kwargs:
            raise RemoteError("a remote cloud receives token ids only, but this backend's prompt "
                              f"carries model inputs ({', '.join(prompt.prefill_kwargs)})")
        ids = prompt.input_ids[0].tolist()
        self.seen, self.history = len(ids) - 1, ids[:-1]

    def crop(self, n: int) -> None:
        self.seen = n
        del self.history[n:]

    def cache_len(self) -> int:
        return self.seen

    def verifier(self, cfg, gen):
        refuse(cfg)
        return RemoteVerifier(self, cfg)


class RemoteVerifier:
    def __init__(self, runner: RemoteRunner, cfg):
        self.runner, self.cfg = runner, cfg

    def __call__(self, full: list[int], block: list[int], q) -> Verdict:
        r, cfg, n = self.runner, self.cfg, len(block)
        ids = list(full) + list(block)
        limit = r.remote.max_model_len
        if limit and len(ids) + 1 > limit:
            raise RemoteError(f"the sequence ({len(ids)} tokens) is longer than the cloud "
                              f"server's max_model_len {limit}")
        rows, bonus, bonus_lp, reply = r.client.score(r.remote.model, ids, n_rows=n)
        r.forwards += 1
        observer = vars(r.remote).get("observer")      # a Recorder (recorder/driver/builtin.py)
        if observer is not None:
            observer(ids, rows, bonus, bonus_lp, reply.seconds)
        r.seen, r.history = len(ids), ids
        if cfg.verify == "rank":
            ok = [row.rank <= cfg.rank_threshold for row in rows]
        else:
            ok = [row.top_id == d for row, d in zip(rows, block)]
        a = ok.index(False) if False in ok else n
        checked = rows[: min(a + 1, n)]
        nxt, nxt_lp = (rows[a].top_id, rows[a].top_logprob) if a < n else (bonus, bonus_lp)
        return Verdict(a, nxt, [row.rank for row in checked],
                       [math.exp(row.logprob) for row in checked],
                       next_prob=math.exp(nxt_lp), next_rank=1, cloud_fed=len(ids),
                       cost=LinkCost(reply.bytes_up, reply.bytes_down, 0.0, reply.seconds))


def _pick_model(client: CompletionsClient, name: str | None) -> tuple[str, int | None]:
    models = client.models()
    ids = [str(m.get("id")) for m in models if isinstance(m, dict)]
    if not ids:
        raise RemoteError(f"cloud server {client.url} serves no model")
    if name is None:
        if len(ids) > 1:
            raise RemoteError(f"cloud server {client.url} serves several models ({_names(ids)});"
                              f" pick one with --cloud-model")
        name = ids[0]
    elif name not in ids:
        raise RemoteError(f"cloud server {client.url} does not serve {name!r}; it serves "
                          f"{_names(ids)}")
    if not _printable(name):
        raise RemoteError(f"cloud server {client.url} names its model {_names([name])}: "
                          f"not a model name")
    entry = models[ids.index(name)]
    limit = entry.get("max_model_len")
    return name, int(limit) if isinstance(limit, int) else None


def _printable(name: str) -> bool:
    return 0 < len(name) <= 200 and name.isprintable()


def _names(ids: list[str], most: int = 5) -> str:
    """The server's model names for a message: a few, each short and printable."""
    shown = [repr(i[:60]) if _printable(i) else "<unprintable>" for i in ids[:most]]
    return ", ".join(shown) + (f" and {len(ids) - most} more" if len(ids) > most else "")


def _check_vocabulary(client: CompletionsClient, model: str, tokenizer) -> None:
    """The server's tokenizer must give the edge's ids for text spread over the edge's vocabulary
    (token ids cross the link, so one shifted id would silently verify the wrong token)."""
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    vocab = len(tokenizer)
    picks = [i for i in range(vocab) if i not in special]
    step = max(1, len(picks) // 48)
    probe = tokenizer.decode(picks[::step] + picks[-1:], skip_special_tokens=True)
    want = tokenizer(probe, add_special_tokens=False).input_ids
    got = client.tokenize(model, probe)
    if got != want:
        at = common_prefix(got, want)
        raise RemoteError(f"the cloud model {model!r} does not share the edge's vocabulary: a probe "
                          f"text tokenizes differently from token {at} on (server {len(got)} ids, "
                          f"edge {len(want)})")
