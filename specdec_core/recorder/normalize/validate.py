"""What a recording must be before anything reads it (issue 36; docs/space.md, "A recording
upload"): a size cap in MB, JSON that parses (deep nesting is "not a recording"), counts of forwards
and fed ids under their caps (specdec_core/caps.py), forwards that do not contradict each other
(each forward's index is its place in the list), and no more output ids than could have been
produced (issue 37). The ONE check for every reader: the Inspect upload, `analyze()`, `record`."""
from __future__ import annotations

import json

from specdec_core.caps import cap, raise_hint
from specdec_core.recorder.normalize.replayed import RecordingError

SCHEMA_PREFIX = "specscope.recording/"
MODELS = ("edge", "cloud")


class RecordingRefused(RecordingError):
    """A recording that is too large or malformed: the message says which limit or what."""


# Every output id comes from a position some forward was fed: more output ids than fed
# positions (plus one per forward and this slack) are ids no model was fed.
UNFED_SLACK = 1000


def max_mb() -> float:
    return cap("recording_mb")


def check_size(n_bytes: int) -> None:
    if n_bytes > max_mb() * 1e6:
        raise RecordingRefused(f"recording too large: {n_bytes / 1e6:.1f} MB "
                               f"(the limit is {max_mb():g} MB); {raise_hint('recording_mb')}")


def parse_json(raw: str | bytes):
    """Raw text -> the JSON object, size-checked first; nesting too deep for the parser is
    refused with its reason."""
    check_size(len(raw.encode("utf-8") if isinstance(raw, str) else raw))
    try:
        return json.loads(raw)
    except RecursionError:
        raise RecordingRefused("not a recording: the JSON is nested too deeply") from None
    except (ValueError, TypeError):
        raise RecordingRefused("not a JSON file: upload a recording saved by SpecScope "
                               "(rec.json)") from None


def _all(v, plain: set, ok) -> bool:
    """v is a list whose items all pass `ok`: items of a `plain` type are passed in one C-level
    pass (JSON and `.tolist()` give only plain ints, floats and None); any other type (a bool, a
    numpy scalar) sends the list to `ok` item by item."""
    return isinstance(v, list) and (set(map(type, v)) <= plain or all(map(ok, v)))


def _int_list(v) -> bool:
    return _all(v, {int}, _int)


def _check_forward(j: int, f) -> int:
    """One forward's shape; returns how many ids it was fed."""
    if not isinstance(f, dict):
        raise RecordingRefused(f"not a usable recording (malformed): forward {j} is not an object")
    if f.get("i") != j:
        raise RecordingRefused(
            f"not a usable recording (malformed): forward {j} says it is forward {f.get('i')!r} (forwards "
            "repeated, reordered or pasted together)")
    if f.get("model") not in MODELS:
        raise RecordingRefused(f"not a usable recording (malformed): forward {j} has model {f.get('model')!r}")
    ids = f.get("ids")
    if ids is not None and not _int_list(ids):
        raise RecordingRefused(f"not a usable recording (malformed): forward {j}'s ids are not token ids")
    L = f.get("cache_len")
    if L is not None and (not isinstance(L, int) or L < 0):
        raise RecordingRefused(f"not a usable recording (malformed): forward {j} has cache_len {L!r}")
    return len(ids or [])


# ---- field shapes (issue 37: a malformed upload gets what is wrong, not an exception name) --
def _kind(v) -> str:
    """A JSON value's kind in words."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true/false"
    if isinstance(v, list) and v:
        odd = next((x for x in v if not _num(x)), v[0])
        return "a list of " + {list: "lists", dict: "objects", str: "texts", type(None): "nulls",
                               bool: "true/false"}.get(type(odd), "numbers")
    return {str: "a text", int: "a number", float: "a number", list: "a list",
            dict: "an object"}.get(type(v), type(v).__name__)


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _num_rows(v) -> bool:
    return isinstance(v, list) and all(_all(r, {int, float}, _num) for r in v)


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is(kind):
    return lambda v: isinstance(v, kind)


def _nums_or_null(v) -> bool:       # a remote cloud's rows have no entropy (recorder/observe/remote_rows.py)
    return _all(v, {int, float, type(None)}, lambda x: x is None or _num(x))


def _opt(ok):
    return lambda v: v is None or ok(v)


# field -> (what it must be, test); _opt: None (not recorded) is allowed
TOP_FIELDS = {"prompt_ids": ("a list of token ids", _int_list), "out_ids": ("a list of token ids", _int_list)}
OPTIONAL_TOP = {"stop_ids": ("a list of token ids", _opt(_int_list)), "declared": ("an object", _is(dict)),
                "vocab": ("an object", _is(dict)), "wall_s": ("a number", _opt(_num))}
OPTIONAL_FWD = {"position_ids": ("a list of positions", _opt(_int_list)),
                "cache_position": ("a list of positions", _opt(_int_list)),
                "mask_shape": ("a list of sizes", _opt(_int_list)), "cache": ("a number", _opt(_num)),
                "rows": ("an object", _opt(_is(dict)))}
ROW_FIELDS = {"offset": ("a number", _int), "vocab": ("a number", _opt(_int)),
              "argmax": ("a list of token ids", _int_list), "top_ids": ("a list of id lists", _num_rows),
              "top_logp": ("a list of number lists", _num_rows),
              "entropy": ("a list of numbers", _nums_or_null)}
OPTIONAL_ROW = {"fed_next": ("an object", lambda v: not v or isinstance(v, dict))}


def _check(obj: dict, fields: dict, where: str, missing: str | None = None) -> None:
    """Each of `fields` in obj has its shape; one absent is refused with `missing` (formatted
    with its name and shape), or skipped where the field is optional (no `missing`)."""
    for key, (want, ok) in fields.items():
        if key not in obj:
            if missing:
                raise RecordingRefused(missing.format(key=key, want=want))
        elif not ok(obj[key]):
            raise RecordingRefused(f"not a usable recording: {where}'{key}' is {_kind(obj[key])}, "
                                   f"not {want}")


def check_fields(rec: dict) -> None:
    """Each field a reader uses has its shape (after check_recording's schema and caps): one
    line naming the field, e.g. "not a usable recording: missing 'out_ids' (...)"."""
    _check(rec, TOP_FIELDS, "", "not a usable recording: missing '{key}' ({want})")
    _check(rec, OPTIONAL_TOP, "")                  # declared / vocab: an object when present
    for j, f in enumerate(rec["forwards"]):
        _check(f, OPTIONAL_FWD, f"forward {j}'s ")
        rows = f.get("rows")
        if rows:
            _check(rows, ROW_FIELDS, f"forward {j}'s rows: ",
                   f"not a usable recording: forward {j}'s scores ('rows') miss '{{key}}'")
            _check(rows, OPTIONAL_ROW, f"forward {j}'s rows: ")
            n = len(rows["argmax"])
            if any(len(rows[k]) != n for k in ("top_ids", "top_logp", "entropy")):
                raise RecordingRefused(f"not a usable recording: forward {j}'s rows disagree in "
                                       "length (argmax, top_ids, top_logp and entropy need one "
                                       "entry per scored row)")


def check_recording(rec: dict) -> None:
    """Raise RecordingRefused (a UserError, one line) unless `rec` is a recording within the
    caps whose forwards are consistent."""
    if not (isinstance(rec, dict) and str(rec.get("schema", "")).startswith(SCHEMA_PREFIX)
            and isinstance(rec.get("forwards"), list)):
        raise RecordingRefused("not a SpecScope recording: expected a JSON object with schema "
                               "'specscope.recording/1' and a 'forwards' list")
    fwds = rec["forwards"]
    if len(fwds) > cap("recording_forwards"):
        raise RecordingRefused(f"recording too large: {len(fwds)} forwards (the limit is "
                               f"{cap('recording_forwards')}); {raise_hint('recording_forwards')}")
    for key in ("prompt_ids", "out_ids"):
        if rec.get(key) is not None and not _int_list(rec[key]):
            raise RecordingRefused(f"not a usable recording (malformed): {key} are not token ids")
    fed = 0
    for j, f in enumerate(fwds):
        fed += _check_forward(j, f)
        if fed > cap("recording_ids"):
            _too_many_ids()
    n_out = len(rec.get("out_ids") or [])
    if n_out > fed + len(fwds) + UNFED_SLACK:
        raise RecordingRefused(
            f"not a usable recording (inconsistent): {n_out:,} output ids, but its {len(fwds):,} "
            f"forwards were fed only {fed:,} ids: {n_out - fed:,} ids no model was fed")
    if fed + n_out + len(rec.get("prompt_ids") or []) > cap("recording_ids"):
        _too_many_ids()


def _too_many_ids():
    raise RecordingRefused(f"recording too large: more than {cap('recording_ids'):,} token ids; "
                           f"{raise_hint('recording_ids')}")
