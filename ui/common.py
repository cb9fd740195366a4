"""What every tab needs: bundled samples by name, backends, the decoder registry behind the
Stop buttons, and result files for the download buttons."""
from __future__ import annotations

import csv
import json
import tempfile
import threading
import time
from pathlib import Path

from specdec_core.backends import available_backends, load_backend
from specdec_core.errors import AudioError, UserError

ROOT = Path(__file__).resolve().parents[1]
SAMPLES_DIR = ROOT / "sample_audio"
MANIFEST = SAMPLES_DIR / "manifest.csv"
DEFAULT_SAMPLE = "angry_01"


def sample_rows() -> list[dict]:
    if not MANIFEST.is_file():
        return []
    with open(MANIFEST, newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if r.get("name")]


def sample_names() -> list[str]:
    return [r["name"] for r in sample_rows()]


def sample_choices() -> list[tuple[str, str]]:
    """Dropdown entries: 'angry_01 · angry · detailed' -> 'angry_01'."""
    out = []
    for r in sample_rows():
        bits = [r["name"]] + [r[k] for k in ("label", "prompt_type") if r.get(k)]
        out.append((" · ".join(bits), r["name"]))
    return out


def sample_path(name: str) -> Path:
    """A bundled clip by its manifest name; never an arbitrary path from the client."""
    for r in sample_rows():
        if r["name"] == name:
            path = (SAMPLES_DIR / r["path"]).resolve()
            if SAMPLES_DIR.resolve() in path.parents and path.is_file():
                return path
    raise AudioError(f"unknown sample {name!r}; choose one of {', '.join(sample_names())}")


def sample_prompt_type(name: str | None) -> str | None:
    for r in sample_rows():
        if r["name"] == name:
            return r.get("prompt_type") or None
    return None


def resolve_audio(sample: str | None, upload) -> tuple[object, str]:
    """(audio source for specdec_core.api, display name). A picked sample wins: uploading or
    recording clears the sample dropdown, and picking a sample only previews it in the player."""
    if sample:
        return str(sample_path(sample)), sample
    if upload:
        path = upload if isinstance(upload, str) else getattr(upload, "path", None) or upload
        return str(path), Path(str(path)).name
    raise AudioError("no audio given: pick a sample, upload a clip or record one")


def backend_choices() -> list[str]:
    return available_backends()


def get_backend(name: str | None):
    return load_backend(name or "demo")


def warm_up(name: str = "demo") -> None:
    """Load the default backend in the background so the first Run does not pay for it."""
    def load():
        try:
            from specdec_core.api import prepare
            from specdec_core.decoding.config import DecodeConfig

            backend = load_backend(name)
            if DEFAULT_SAMPLE in sample_names():  # also imports and warms the audio/prosody stack
                prepare(backend, str(sample_path(DEFAULT_SAMPLE)), DecodeConfig())
        except Exception:  # noqa: BLE001 - a missing model shows up as a clear error on Run
            pass
    threading.Thread(target=load, daemon=True, name="specscope-warmup").start()


# ---- Stop buttons: the running decoders of each browser session -----------------------------
_RUNNING: dict[str, list] = {}
_LOCK = threading.Lock()


def register(session: str | None, decoder) -> None:
    with _LOCK:
        _RUNNING.setdefault(session or "", []).append(decoder)


def unregister(session: str | None, decoder) -> None:
    with _LOCK:
        running = _RUNNING.get(session or "", [])
        if decoder in running:
            running.remove(decoder)


def cancel_session(session: str | None) -> int:
    """Cancel every decode this session started; they end at the next round boundary."""
    with _LOCK:
        running = list(_RUNNING.get(session or "", []))
    for dec in running:
        dec.cancel()
    return len(running)


def session_of(request) -> str:
    return getattr(request, "session_hash", None) or ""


# ---- files for download buttons ----------------------------------------------------------------
_OUT = Path(tempfile.gettempdir()) / "specscope-exports"


def write_json(stem: str, obj) -> str:
    _OUT.mkdir(parents=True, exist_ok=True)
    path = _OUT / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}-{int(time.time() * 1000) % 1000:03d}.json"
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=1), encoding="utf-8")
    return str(path)


def export_dir(stem: str) -> Path:
    d = _OUT / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}-{int(time.time() * 1000) % 1000:03d}"
    d.mkdir(parents=True, exist_ok=True)
    return d


def user_message(e: Exception) -> str:
    """One line for the page: UserErrors as they are, anything else as an internal error."""
    if isinstance(e, UserError):
        return str(e)
    return f"internal error ({type(e).__name__}): {str(e).splitlines()[0] if str(e) else ''}"
