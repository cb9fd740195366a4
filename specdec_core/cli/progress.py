"""The batch command's progress on stderr: a tqdm bar (rows done/total, rows/s, ETA, failures)
and one line per finished row above it."""
from __future__ import annotations

import sys


class RowProgress:
    """on_row callback of evaluation.batch.scale.run_batch_dir."""

    def __init__(self, out_dir, file=None):
        self.out_dir, self.file = out_dir, file or sys.stderr
        self.bar = None

    def __call__(self, ev: dict) -> None:
        from tqdm import tqdm

        if ev["type"] == "start":
            if ev["resumed"]:
                tqdm.write(f"resume: {ev['resumed']} of {ev['total']} rows already in "
                           f"{self.out_dir}/results.jsonl, running {ev['total'] - ev['resumed']}",
                           file=self.file)
            self.bar = tqdm(total=ev["total"], initial=ev["done"], unit="row", file=self.file,
                            dynamic_ncols=True, desc=f"batch ({ev['engine']})")
            self.bar.set_postfix(failed=ev["failed"], refresh=False)
            return
        r = ev["row"]
        if r["ok"]:
            m = r["metrics"]
            acc = m.get("acceptance_rate")
            acc = "not checked by the cloud" if acc is None else f"acceptance {acc:.1%}"
            loops = f", loops ({m['cycles']} cycle(s))" if m.get("cycles") else ""
            status = f"ok  {m.get('hanzi_count')} 汉字, {acc}{loops}: {r['text'][:40]}"
        else:
            status = f"error: {r['error']}"
        line = f"[{ev['done']}/{ev['total']}] {r['config']} {r['name']}: {status}"
        if self.bar is None:
            print(line, file=self.file, flush=True)
            return
        self.bar.write(line, file=self.file)
        self.bar.set_postfix(failed=ev["failed"], refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
