"""Device time per round on a GPU (issue 44 item 4): CUDA events around every forward, summed per
round, so a round's wall time splits into the device's work and the host's overhead (a
launch-bound decode shows a small device share). CUDA only; on a CPU rounds carry no device_s."""
from __future__ import annotations

import torch


class DeviceClock:
    def __init__(self):
        self.pairs: list = []

    @staticmethod
    def for_device(device) -> "DeviceClock | None":
        return DeviceClock() if torch.device(device).type == "cuda" else None

    def start(self):
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def stop(self, start) -> None:
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        self.pairs.append((start, ev))

    def take(self) -> float:
        """Seconds of device time since the last take (one synchronize)."""
        if not self.pairs:
            return 0.0
        torch.cuda.synchronize()
        s = sum(a.elapsed_time(b) for a, b in self.pairs) / 1e3
        self.pairs.clear()
        return s


def round_device_s(*runners) -> float | None:
    """The round's device seconds over the runners with a clock (None: none has one)."""
    clocks = [c for r in runners if (c := getattr(r, "device_clock", None)) is not None]
    return round(sum(c.take() for c in clocks), 6) if clocks else None
