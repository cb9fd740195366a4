"""Streaming detection of short loops in the committed token stream (seed 003: greedy drafts
stuck in "音色中，音色中，…", seed 001: "，，，，" floods).

A tail is periodic with period p when every token equals the one p places before it; for each p
in 1..max_period the detector keeps the current run of such matches (O(max_period) a push).
Span = run + p. A cycle is, for period 1, the same token >= max(4, min_repeats) times ("，，，，",
not reduplication "慢慢", "哈哈哈"); for p >= 2, span >= max(min_repeats * p, min_span), with the
defaults 3 full repeats (not a word said twice, "一点一点"). The smallest qualifying period is
reported (needed spans grow with p, so it is the primitive period)."""
from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from specdec_core.errors import ConfigError


@dataclass
class Cycle:
    """Tokens [start, end) of the stream repeat `pattern_ids` (len = period) from `start`."""
    start: int
    end: int
    period: int
    pattern_ids: list[int] = field(default_factory=list)

    def warning(self, text: str) -> dict:
        """The trace's warning for it (its start, end, period and text are trace.cycles' entry)."""
        return {"kind": "cycle", "message": f"cycle of period {self.period} at tokens {self.start}-"
                f"{self.end - 1} ({text!r})", "start": self.start, "end": self.end,
                "period": self.period, "text": text}


class CycleDetector:
    """Streaming cycle detector over token ids, indices counted from the first push. push(t) returns
    a new Cycle the moment the tail first qualifies; while it goes on (`current`), push extends its
    `end` and returns None. `cycles` holds every cycle found."""

    def __init__(self, min_repeats: int = 3, max_period: int = 8, min_span: int = 6):
        if min_repeats < 2:
            raise ConfigError(f"cycle min_repeats must be >= 2, got {min_repeats}")
        if not 1 <= max_period <= 64:
            raise ConfigError(f"cycle max_period must be between 1 and 64, got {max_period}")
        if min_span < 2:
            raise ConfigError(f"cycle min_span must be >= 2, got {min_span}")
        self.min_repeats = min_repeats
        self.max_period = max_period
        self.min_span = min_span
        # need[p]: tokens a periodic tail of period p must span to count as a cycle.
        self.need = [0, max(4, min_repeats)] + [max(min_repeats * p, min_span)
                                                for p in range(2, max_period + 1)]
        self.reset()

    @property
    def tail_needed(self) -> int:
        """How many trailing tokens `would_extend` looks at."""
        return max(self.need) - 1

    def reset(self) -> None:
        self.n = 0
        self.cycles: list[Cycle] = []
        self.current: Cycle | None = None
        self._buf: deque[int] = deque(maxlen=self.max_period)
        self._run = [0] * (self.max_period + 1)  # _run[p]: trailing tokens equal to the one p back

    def push(self, token_id: int) -> Cycle | None:
        t = int(token_id)
        buf, run = self._buf, self._run
        for p in range(1, self.max_period + 1):
            run[p] = run[p] + 1 if len(buf) >= p and buf[-p] == t else 0
        buf.append(t)
        self.n += 1

        cur = self.current
        if cur is not None:
            if run[cur.period]:
                cur.end = self.n
                return None
            self.current = None
        for p in range(1, self.max_period + 1):
            span = run[p] + p
            if run[p] and span >= self.need[p]:
                last = list(buf)[-p:]  # tokens [n - p, n); rotate so the pattern starts at start
                pattern = [last[(j - span) % p] for j in range(p)]
                cyc = Cycle(self.n - span, self.n, p, pattern)
                self.cycles.append(cyc)
                self.current = cyc
                return cyc
        return None

    def detect(self, ids: Sequence[int]) -> list[Cycle]:
        """Every cycle in a whole sequence (offline; this detector's own state is untouched)."""
        d = CycleDetector(self.min_repeats, self.max_period, self.min_span)
        for t in ids:
            d.push(t)
        return d.cycles

    def would_extend(self, ids_tail: Sequence[int], t: int) -> bool:
        """Would appending t to a stream ending in ids_tail continue or create a cycle?
        Only the last `tail_needed` tokens of ids_tail matter."""
        s = [int(x) for x in ids_tail[max(0, len(ids_tail) - self.tail_needed):]]
        s.append(int(t))
        m = len(s)
        for p in range(1, self.max_period + 1):
            need = self.need[p]
            if m >= need and all(s[i] == s[i - p] for i in range(m - need + p, m)):
                return True
        return False
