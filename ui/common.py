"""What every tab needs: samples, backends, Stop buttons' cancel Events, limits and result files."""
from __future__ import annotations

import contextlib
import csv
import functools
import html
import json
import os
import re
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

import gradio as gr

from specdec_core.backends import load_backend
from specdec_core.decoding.config import DecodeConfig
from specdec_core.decoding.knobs import short
from specdec_core.errors import AudioError, ConfigError, UserError

ROOT = Path(__file__).resolve().parents[1]
SAMPLES_DIR = ROOT / "sample_audio"
MANIFEST = SAMPLES_DIR / "manifest.csv"
# Clips in voices, sentences and speeds that the prosody calibration never saw (issue 14); the
# app lists them after the shipped samples as "unheard/<name>" and opens on one of them.
UNHEARD = "unheard"
DEFAULT_SAMPLE = "unheard/angry_f3"


def _manifest_rows(path: Path, prefix: str = "") -> list[dict]:
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r.get("name")]
    return [{**r, "name": prefix + r["name"], "path": prefix + r["path"], "unheard": bool(prefix)}
            for r in rows]


def sample_rows() -> list[dict]:
    return (_manifest_rows(MANIFEST)
            + _manifest_rows(SAMPLES_DIR / UNHEARD / "manifest.csv", UNHEARD + "/"))


def sample_names() -> list[str]:
    return [r["name"] for r in sample_rows()]


def sample_choices() -> list[tuple[str, str]]:
    """Dropdown entries: 'angry_01 · angry' -> 'angry_01' (the prompt type is the user's choice)."""
    return [(" · ".join(filter(None, (r["name"], r.get("label")))), r["name"]) for r in sample_rows()]


def manifest_size() -> int:
    """Rows of the bundled manifest (what the Batch tab runs)."""
    return len(_manifest_rows(MANIFEST))


def manifest_labels() -> list[str]:
    """The bundled manifest's labels, in first-seen order."""
    return list(dict.fromkeys(r.get("label") or "(none)" for r in _manifest_rows(MANIFEST)))


def sample_path(name: str) -> Path:
    """A bundled clip by its manifest name; never an arbitrary path from the client."""
    for r in sample_rows():
        if r["name"] == name:
            path = (SAMPLES_DIR / r["path"]).resolve()
            if SAMPLES_DIR.resolve() in path.parents and path.is_file():
                return path
    raise AudioError(f"unknown sample {short(name, 40)}; choose one of {', '.join(sample_names())}")


def resolve_audio(sample: str | None, upload) -> tuple[object, str]:
    """(audio source, display name): a picked sample wins (uploading or recording clears it)."""
    if sample:
        return str(sample_path(sample)), sample
    if upload:
        path = upload_path(upload)
        return str(path), Path(str(path)).name
    raise AudioError("no audio given: pick a sample, upload a clip or record one")


def upload_path(upload):
    """An upload's path: widgets give it as a str, the API (gr.api) as Gradio's FileData dict."""
    return upload.get("path") if isinstance(upload, dict) else upload


def check_upload(path) -> str | None:
    """A one-line reason why an uploaded file is not a usable clip, or None when it is."""
    if not path:
        return None
    from specdec_core.audio.loading import load_audio

    try:
        load_audio(str(path))
    except UserError as e:
        return str(e)
    except Exception as e:  # noqa: BLE001 - any reader failure is "not audio" to the user
        return f"{Path(str(path)).name}: not a readable audio file ({type(e).__name__})"
    return None


def run_context(backend, cloud_url: str | None, cfg: DecodeConfig | None = None) -> list[tuple[str, str]]:
    """The status line's badges: backend, dtype and device, the cloud, and the faults that are on."""
    out = [("backend", getattr(backend, "name", "?"))]
    try:
        p = next((backend.cloud or backend.edge).parameters())
        out.append(("dtype", f"{str(p.dtype).replace('torch.', '')} on {p.device}"))
    except Exception:  # noqa: BLE001 - a remote cloud has no local parameters
        pass
    out.append(("cloud", (cloud_url or "").strip() or "in this process"))
    return out + [("fault", f) for f in (cfg.faults if cfg else ())]


def side_configs(sides) -> dict[str, DecodeConfig]:
    """{side: DecodeConfig} from (side, knobs dict or JSON text) pairs; a bad one's error names its side."""
    out = {}
    for side, given in sides:
        try:
            out[side] = (DecodeConfig.from_dict(given) if isinstance(given, dict)
                         else DecodeConfig.from_json((given or "").strip() or "{}"))
        except ConfigError as e:
            raise ConfigError(f"config {side}: {e}") from None
    return out


def token_texts(tokenizer):
    """token id -> its text, memoised ("#id" where the tokenizer cannot say)."""
    @functools.cache
    def text(i):
        try:
            return tokenizer.decode([int(i)])
        except Exception:  # noqa: BLE001
            return f"#{i}"
    return text


_WARMED = threading.Event()      # cleared while the start-up warm-up runs (app.py: warm_up())
_WARMED.set()


def get_backend(name: str | None):
    # SPECSCOPE_DTYPE=float32|bfloat16|float16: the app's backends in that dtype (issue 27)
    if not _WARMED.is_set() and threading.current_thread().name != "specscope-warmup":
        _WARMED.wait(300)   # the first run waits for the warm-up instead of competing with it (issue 50)
    return load_backend(name or "demo", dtype=os.environ.get("SPECSCOPE_DTYPE") or None)


def warm_up(name: str = "demo") -> None:
    """Load and warm the default backend in the background; a Run pressed meanwhile waits for it
    (decoding beside it on the same cores read 16-23 s instead of 2 s)."""
    def load():
        try:
            from specdec_core.api import prepare, stream_prompt

            backend = get_backend(name)          # the clip also warms the audio/prosody stack
            cfg = DecodeConfig(max_new_tokens=8, min_new_tokens=1, time_limit_s=30)
            for _ in stream_prompt(backend, prepare(backend, str(sample_path(DEFAULT_SAMPLE)), cfg), cfg):
                pass                               # the judged decode path: recorder, checks, dependence
        except Exception:  # noqa: BLE001 - a missing model shows up as a clear error on Run
            pass
        finally:
            _WARMED.set()
    _WARMED.clear()
    threading.Thread(target=load, daemon=True, name="specscope-warmup").start()


# ---- server limits (a shared Space) ------------------------------------------------------------
def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


MAX_FILE_SIZE = os.environ.get("SPECSCOPE_MAX_FILE_SIZE", "20mb")      # per uploaded file
CACHE_EVERY_S = _env_float("SPECSCOPE_CACHE_EVERY_S", 600.0)           # clean-up period
CACHE_MAX_AGE_S = _env_float("SPECSCOPE_CACHE_MAX_AGE_S", 3600.0)      # files older are deleted


# ---- Stop buttons: the cancel Events of each browser session's running work ------------------
_RUNNING: dict[str, list[threading.Event]] = {}
_LOCK = threading.Lock()


@contextlib.contextmanager
def running(session: str | None, cancel: threading.Event | None = None):
    """Yields `cancel` (new if None), set by the session's Stop button and when the block ends."""
    cancel = cancel or threading.Event()
    with _LOCK:
        _RUNNING.setdefault(session or "", []).append(cancel)
    try:
        yield cancel
    finally:
        cancel.set()
        with _LOCK:
            mine = _RUNNING.get(session or "", [])
            if cancel in mine:
                mine.remove(cancel)
            if not mine:
                _RUNNING.pop(session or "", None)


def cancel_session(session: str | None) -> int:
    """Stop every decode and batch this session started; each ends within one round."""
    with _LOCK:
        running = list(_RUNNING.get(session or "", []))
    for ev in running:
        ev.set()
    return len(running)


def session_of(request) -> str:
    return getattr(request, "session_hash", None) or ""


# ---- files for download buttons ----------------------------------------------------------------
_OUT = Path(os.environ.get("SPECSCOPE_EXPORT_DIR") or Path(tempfile.gettempdir()) / "specscope-exports")


def prune_exports() -> int:
    """Delete exports older than CACHE_MAX_AGE_S (Gradio serves its own copies); returns how many went."""
    import shutil

    now, gone = time.time(), 0
    for p in list(_OUT.iterdir()) if _OUT.is_dir() else []:
        try:
            if now - p.stat().st_mtime > CACHE_MAX_AGE_S:
                shutil.rmtree(p) if p.is_dir() else p.unlink()
                gone += 1
        except OSError:
            pass
    return gone


def sturdy_cache_cleanup() -> None:
    """Keep Gradio's delete_cache alive: its thread iterates the temp-file sets while uploads add to them
    (gradio 6.31), and one "Set changed size during iteration" ends the schedule for good. Here it runs on
    snapshots, what it deleted leaves the live sets, and an error is printed instead."""
    from types import SimpleNamespace

    from gradio import route_utils

    delete = route_utils.delete_files_created_by_app
    if getattr(delete, "sturdy", False):
        return

    def sturdy(blocks, age):
        live = list(blocks.temp_file_sets)
        snaps = [set(s) for s in live]
        kept = [set(s) for s in snaps]
        try:
            delete(SimpleNamespace(blocks=dict(blocks.blocks), temp_file_sets=kept), age)
        except Exception as e:     # noqa: BLE001 - a clean-up error must not end the schedule
            print(f"[specscope] cache clean-up: {type(e).__name__}: {e}", file=sys.stderr)
        for s, snap, k in zip(live, snaps, kept):
            s -= snap - k                   # the deleted files; uploads added meanwhile stay

    sturdy.sturdy = True
    route_utils.delete_files_created_by_app = sturdy


def export_dir(stem: str, suffix: str = "") -> Path:
    """A new export path by `stem` and the time: a folder (made), or with `suffix` a file path; the
    stem made a safe file-name part ('unheard/angry_f3' -> 'unheard_angry_f3': never outside _OUT)."""
    prune_exports()
    stem = re.sub(r"[^\w.-]+", "_", stem).strip("._") or "clip"
    path = _OUT / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}-{int(time.time() * 1000) % 1000:03d}{suffix}"
    (path.parent if suffix else path).mkdir(parents=True, exist_ok=True)
    return path


def write_json(stem: str, obj) -> str:
    path = export_dir(stem, ".json")
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=1), encoding="utf-8")
    return str(path)


def toast_text(msg) -> str:
    """A toast's text, escaped: toasts render HTML, and a visitor's value must show as text."""
    return html.escape(str(msg), quote=False)


def failure(e: Exception, toast: bool = False) -> str:
    """A failed handler's one line: a UserError as it is, else an internal error (a bug's traceback and
    a remote's detail go to the log); `toast` also shows a warning."""
    if isinstance(e, UserError):
        if getattr(e, "detail", ""):
            print(f"specscope: {e} | the server said: {e.detail}", file=sys.stderr, flush=True)
        msg = str(e)
    else:
        traceback.print_exc()
        msg = f"internal error ({type(e).__name__}): {str(e).splitlines()[0] if str(e) else ''}"
    if toast:
        gr.Warning(toast_text(msg))
    return msg


def api_error(e: Exception):
    """An API endpoint's failure: its one line as the gr.Error the client raises (AppError)."""
    raise gr.Error(toast_text(failure(e)), print_exception=False) from None


def stopper(until: str):
    """A Stop button's handler: every decode and batch of the session stops after `until`."""
    def stop(request: gr.Request):
        if cancel_session(session_of(request)):
            gr.Info(f"stopping after the current {until}")
    return stop
