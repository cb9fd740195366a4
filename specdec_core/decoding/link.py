"""The edge-cloud link: what one cloud call would send (the unseen ids, then the block) and how
long that takes (one round trip plus the uplink), modelled for a local cloud; a remote cloud
measures the same fields (docs/remote.md, "The link model")."""
from __future__ import annotations

from dataclasses import dataclass

# Framing of one message: IPv4 + TCP headers (40 bytes) and a 24-byte application header
# (session id, round number, token count). One message per direction per call.
FRAME_BYTES = 64
ID_BYTES = 4      # one token id as uint32 (Qwen's 151k vocabulary needs more than 16 bits)
PROB_BYTES = 4    # one float32 draft probability: verify=sampling needs q(d) at the cloud


@dataclass
class LinkCost:
    """What one cloud call cost on the link. Measured for a remote cloud (request_s set),
    modelled for a local one (link_s = the modelled transfer time, 0 with the link model off)."""
    bytes_up: int = 0
    bytes_down: int = 0
    link_s: float = 0.0
    request_s: float | None = None


@dataclass(frozen=True)
class LinkModel:
    rtt_ms: float = 0.0
    uplink_kbps: float = 0.0

    def seconds(self, bytes_up: int) -> float:
        """Modelled time of one call: a round trip plus the uplink transfer (0 = off each)."""
        t = self.rtt_ms / 1000.0
        if self.uplink_kbps > 0:
            t += bytes_up * 8 / (self.uplink_kbps * 1000.0)
        return t

    def call(self, n_ids: int, with_probs: bool = False) -> LinkCost:
        """Down: one message with the accepted count and the correction or bonus token."""
        up = uplink_bytes(n_ids, with_probs)
        return LinkCost(up, FRAME_BYTES + 2 * ID_BYTES, self.seconds(up))


def uplink_bytes(n_ids: int, with_probs: bool = False) -> int:
    """One uplink message carrying n_ids token ids (and their draft probabilities)."""
    return FRAME_BYTES + n_ids * (ID_BYTES + (PROB_BYTES if with_probs else 0))


def link_metrics(trace, wall_s: float) -> dict:
    """Per-run link figures from the round records: calls, bytes, and end-to-end latency with the
    modelled link time added (a remote cloud's real link time is already inside wall_s).
    ttft_s: decode start to the end of the first round that committed a token."""
    rounds = trace.rounds
    called = [r for r in rounds if r.verified]
    link_s = sum(r.link_s for r in called)
    e2e = wall_s + link_s
    ttft, acc = None, 0.0
    for r in rounds:
        acc += r.draft_s + r.verify_s + r.link_s
        if r.committed:
            ttft = acc
            break
    req = [r.request_s for r in called if r.request_s is not None]
    n = len(trace.tokens)
    up, down = sum(r.bytes_up for r in called), sum(r.bytes_down for r in called)
    return {
        "uplink_calls": len(called),
        "bytes_up": up,
        "bytes_down": down,
        "bytes_per_call": round((up + down) / len(called), 1) if called else None,
        "link_s": round(link_s, 4),
        "link": "measured" if req else ("modelled" if link_s > 0 else "none"),
        "request_ms_mean": round(1000 * sum(req) / len(req), 3) if req else None,
        "e2e_s": round(e2e, 4),
        "e2e_ms_per_token": round(1000 * e2e / n, 3) if n else None,
        "ttft_s": round(ttft, 4) if ttft is not None else None,
    }
