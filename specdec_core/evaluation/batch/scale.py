"""`batch ... --out DIR [--resume]`: a manifest x configurations into DIR, on either engine
(docs/scale.md). Rows are journalled as they finish (journal.py) and returned in manifest order."""
from __future__ import annotations

import threading
from collections import Counter
from contextlib import ExitStack, closing

from specdec_core.decoding.config import DecodeConfig
from specdec_core.errors import UserError
from specdec_core.evaluation.batch.run import BatchResult, failed_row, run_rows, speaker_stats_for
from specdec_core.evaluation.batch.clouds import CloudPool
from specdec_core.evaluation.batch.edges import EdgeSession
from specdec_core.evaluation.batch.journal import Journal, row_key

ENGINES = ("local", "ray")


def _checked(engine, workers, clips: list, configs: dict, cloud_urls, resume: bool) -> list:
    """The batch's arguments checked (UserError with one line); returns the cloud URLs."""
    if engine not in ENGINES:
        raise UserError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == "local" and (workers or 1) != 1:
        raise UserError("the local engine runs one worker; use --engine ray for --workers N")
    if workers is not None and workers < 1:
        raise UserError(f"--workers must be >= 1, got {workers}")
    if not clips or not configs:
        raise UserError("no clips to run" if not clips else "no configuration to run")
    urls = [u for u in (cloud_urls or []) if u and u.strip()]
    if urls:
        from specdec_core.backends.remote import refuse

        for cfg in configs.values():
            refuse(cfg)
    if resume:
        dup = [n for n, c in Counter(c.name for c in clips).items() if c > 1]
        if dup:
            raise UserError(f"--resume needs unique clip names; the manifest repeats {dup[0]!r}")
    return urls


def run_batch_dir(spec: dict, clips, configs: dict[str, DecodeConfig], out, engine: str = "local",
                  workers: int | None = None, ray_address: str | None = None, cloud_urls=(),
                  resume: bool = False, on_row=None, edges=None,
                  cancel: threading.Event | None = None) -> tuple[BatchResult, int]:
    """(result, rows run now); on_row gets a "start" event, then a "progress" event per row. `edges`:
    a warm RayEdges to use (and keep). `cancel` stops the batch: no new row starts, Ray rows in
    flight are dropped with their workers (the journal keeps every finished row for `resume`)."""
    clips = list(clips)
    urls = _checked(engine, workers, clips, configs, cloud_urls, resume)
    raw = {k: c.to_dict() for k, c in configs.items()}
    jobs = [(clip, cname) for clip in clips for cname in configs]
    spec = dict(spec, remote=bool(urls))
    with closing(Journal(out, resume)) as journal:
        todo = [j for j in jobs if _key(j) not in journal.rows]
        # per-speaker prosody statistics come from ALL the speaker's clips, resumed ones too
        speakers = speaker_stats_for(spec.get("backend") or "demo", clips) if todo else {}
        resumed = len(jobs) - len(todo)
        state = {"done": resumed, "failed": sum(not journal.rows[_key(j)]["ok"]
                                                for j in jobs if _key(j) in journal.rows)}

        tell = on_row or (lambda event: None)

        def start():   # after the workers are up: the bar's rate is the decoding's
            tell({"type": "start", "done": resumed, "total": len(jobs), "failed": state["failed"],
                  "resumed": resumed, "engine": engine})

        def emit(job, row):
            journal.append(row)
            state["done"] += 1
            state["failed"] += not row["ok"]
            tell({"type": "progress", "done": state["done"], "total": len(jobs),
                  "failed": state["failed"], "resumed": resumed, "row": row})

        pool = CloudPool(urls) if todo else None
        if not todo:
            start()
        elif engine == "local":
            session = EdgeSession(spec, raw)
            session.warm(pool.up())
            start()
            _run_local(session, todo, pool, emit, raw, speakers, cancel)
        else:
            with ExitStack() as stack:
                if edges is None:
                    from specdec_core.evaluation.batch.ray_engine import RayEdges

                    edges = stack.enter_context(RayEdges(spec, raw, workers, ray_address))
                    edges.warm(pool.up())
                start()
                edges.run(todo, pool, emit, workers, speakers, cancel)
        rows = [journal.rows[_key(j)] for j in jobs if _key(j) in journal.rows]
    result = BatchResult.from_rows(rows, raw, backend=spec.get("backend") or "")
    return result, state["done"] - resumed


def _run_local(session: EdgeSession, jobs, pool: CloudPool, emit, raw, speakers, cancel=None) -> None:
    def one(job):
        url, why = pool.pick()
        if why:
            return failed_row(*job, raw[job[1]], why, retry=True)
        row = session.run(job, url, speakers.get(job[0].speaker), cancel=cancel)
        pool.done(url, row)
        return row
    for job, row in run_rows(jobs, one, cancel):
        emit(job, row)


def _key(job) -> tuple[str, str]:
    clip, cname = job
    return row_key({"name": clip.name, "config": cname})
