"""The Inspect tab and the `/record` endpoint: record an example decoder (or upload a recording)
and see its trace, plots, blind findings and per-step drill-down (wiring only)."""
from __future__ import annotations

import ast
import re
import json
import traceback
from pathlib import Path

import gradio as gr

from components.divergence import numerics_html
from components.findings import config_badges, findings_count, findings_html
from components.inspect_view import (counts_line, record_help_html, pooled_findings_html, pooled_html, pooled_trace, recording_counts,
                                     round_choices, round_html, step_round)
from components.plots import accepted_length_figure, entropy_figure, position_acceptance_figure
from components.timing_plot import timing_figure
from components.token_view import render_tokens
from components.tree_view import picked_tree, render_tree
from specdec_core.errors import UserError
from specdec_core.recorder import check_recording, check_size, max_mb, parse_json

from . import common
from .limits import ADMIT, in_slot, release_memory
from .live import colour_radio
from components.status import status_html

EXAMPLES_DIR = common.ROOT / "examples" / "decoders"
EMPTY = "No trace yet: pick a decoder and a clip, then press Record (or upload a recording)."


GROUPS = ("Correct loops", "One bug each", "Trees", "Heads")     # the decoder list's order
WORDS = {"hf": "HF", "eos": "EOS", "vllm": "vLLM", "eagle": "EAGLE", "1x1": "1×1", "topk": "top-k"}


def _doc(name: str) -> str:
    """An example decoder's module docstring, read without running the file."""
    return ast.get_docstring(ast.parse((EXAMPLES_DIR / f"{name}.py").read_text(encoding="utf-8"))) or ""


def example_group(name: str) -> str:
    """Trees and heads by file name; the rest by the docstring's first words: a bug or a correct loop."""
    if name.startswith(("tree_", "head_")):
        return GROUPS[2 if name.startswith("tree_") else 3]
    first = _doc(name).strip()
    return GROUPS[1] if re.match(r"(Bug|Two independent bugs)\b|\w+\.py with ", first) else GROUPS[0]


def example_title(name: str) -> str:
    """The file name in words, without the group's prefix: tree_no_compaction -> "No compaction"."""
    words = name.split("_")
    words = words[1:] if len(words) > 1 and words[0] in ("tree", "head") else words
    title = " ".join(WORDS.get(w, w) for w in words)
    return title[:1].upper() + title[1:]


def example_names() -> list[str]:
    """Every example decoder, by group (GROUPS), `correct` first."""
    names = sorted(p.stem for p in EXAMPLES_DIR.glob("*.py") if not p.stem.startswith("_"))
    return sorted(names, key=lambda n: (GROUPS.index(example_group(n)), n != "correct", n))


def example_summary(name: str) -> str:
    """The docstring's first sentence on one line, seed reference left out ("Bug:" too in the bug group)."""
    para = " ".join(_doc(name).strip().split("\n\n")[0].split())          # the first paragraph, one line
    bug = "" if example_group(name) == GROUPS[1] else "Bug: "
    para = re.sub(r"^Bug( \([^)]*\))?:\s*", bug, para)
    first = re.split(r"\.\s(?=[A-Z])", para)[0].rstrip(".:")       # its first sentence
    if ".py" not in first.split(" ")[0]:                             # a file name keeps its case
        first = first[:1].upper() + first[1:]
    return first if len(first) <= 110 else first[:109].rsplit(" ", 1)[0] + "…"


def example_choices() -> list[tuple[str, str]]:
    """(label, name) for the decoder list: its group, a title, what it does and its file."""
    return [(f"{example_group(n)} · {example_title(n)} — {example_summary(n)} ({n}.py)", n)
            for n in example_names()]


def unreadable(e: Exception, name: str = "") -> UserError:
    """An upload that breaks the analysis: one line on what is wrong with it (traceback to the log)."""
    traceback.print_exc()
    what = f"it has no field {e.args[0]!s}" if isinstance(e, KeyError) else "a field has the wrong type or shape"
    return UserError(f"{f'{name}: ' if name else ''}not a usable recording: {what} "
                     "(write it with `.venv/bin/python -m specdec_core record`)")


OWN_CODE_ENV = "SPECSCOPE_RECORD_OWN_CODE"


def own_code_allowed() -> bool:
    """Recording a file runs its code here: only with SPECSCOPE_RECORD_OWN_CODE=1, never on a Space."""
    import os

    return os.environ.get(OWN_CODE_ENV, "").strip() == "1" and not os.environ.get("SPACE_ID")


def _own_function(path: str):
    """The user's .py file: its `decode`, checked against the call record makes."""
    from specdec_core.recorder import check_call, load_function

    if not own_code_allowed():
        raise UserError(f"recording your own file from the page is off: the operator sets {OWN_CODE_ENV}=1 "
                        "(never on a Space); or run `.venv/bin/python -m specdec_core record FILE.py AUDIO`")
    fn, path = load_function(str(path))
    check_call(fn, 4, {"k": 4, "max_new_tokens": 8, "stop_ids": ()})
    return fn, path


def record_example(decoder: str, sample: str, k: int = 4, max_new_tokens: int = 128,
                   own: str | None = None) -> dict:
    """An example decoder (or the allowed file `own`) recorded on a bundled clip -> CLI result entry."""
    from specdec_core.recorder import load_function, record_clip

    if own:
        fn, path = _own_function(own)
        decoder = Path(own).name
    elif not decoder or not sample:
        raise UserError("pick an example decoder and a sample clip, then Record")
    elif decoder not in example_names():
        raise UserError(f"unknown example decoder {decoder!r}; choose one of {', '.join(example_names())}")
    else:
        fn, path = load_function(str(EXAMPLES_DIR / f"{decoder}.py"))
    backend = common.get_backend("demo")
    knobs = {"k": int(k), "max_new_tokens": int(max_new_tokens), "verify": "greedy",
             "temperature": fn.__globals__.get("TEMPERATURE") or 0.0, "prompt_type": "detailed"}
    res = {"error": None, **record_clip(fn, path, backend, common.sample_path(sample), knobs, seed=0,
                                        isolated=True), "audio": sample, "decoder": decoder}
    if not res["ok"] and not res.get("recording"):
        raise UserError(res["error"])
    if not res["ok"]:                    # what ran before the decoder failed, judged as recorded
        res.update(analyzed(dict(res["recording"], backend="demo", error=res["error"])))
    return res


def _with_error(result: dict) -> dict:
    """A `record` result's recording with the result's error kept: a failed run never reads as clean."""
    rec = result["recording"]
    if result.get("error") and not rec.get("error"):
        rec = dict(rec, error=str(result["error"]))
    return rec


def parse_recordings(raw: str, label: str = "") -> list[tuple[str, dict]]:
    """[(name, checked recording)] from a recording JSON or a `record` output; a refusal starts with `label`."""
    try:
        obj = parse_json(raw)
        if isinstance(obj, dict) and isinstance(obj.get("recording"), dict):
            obj = obj["recording"]
        found = [(label, obj)]
        if isinstance(obj, dict) and isinstance(obj.get("results"), list):
            found = [(f"{label}: {Path(str(r.get('audio') or i)).stem}", _with_error(r))
                     for i, r in enumerate(obj["results"], 1)
                     if isinstance(r, dict) and isinstance(r.get("recording"), dict)] or [(label, None)]
        for _, rec in found:
            check_recording(rec)
        return found
    except UserError as e:
        if not label:
            raise
        raise UserError(f"{label}: {e}") from None


def parse_recording(raw: str) -> dict:
    """A recording JSON, or a `record` CLI output (its first result) -> the recording dict, checked."""
    return parse_recordings(raw)[0][1]


def size_guard_js() -> str:
    """Refuses a file over the upload limit (the recording cap, or Gradio's upload cap if lower) in the
    browser with its size (Gradio's cap says only "Error")."""
    from gradio.utils import _parse_file_size

    cap = _parse_file_size(common.MAX_FILE_SIZE)
    js = (Path(__file__).parent / "size_guard.js").read_text(encoding="utf-8")
    return (js.replace("@LIMIT@", f"{min(max_mb(), cap / 1e6) if cap else max_mb():g}")
            .replace("@TEMPLATE@", json.dumps(status_html("err", "could not inspect", "-"))))


def analyzed(rec: dict, name: str = "") -> dict:
    """One checked recording analysed -> its page entry; a file that breaks the analysis -> one line."""
    from specdec_core.recorder import judge

    try:
        return judge(rec, common.get_backend("demo").tokenizer, shape="page", ok=not rec.get("error"),
                     error=rec.get("error"))
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001
        raise unreadable(e, name) from None


def analyze_upload(raw: str) -> dict:
    return {"audio": None, **analyzed(parse_recording(raw))}


def analyze_pool(files: list[tuple[str, str]]) -> tuple[list[dict], list[dict]]:
    """[(label, raw JSON)] -> (one entry per recording, pooled findings of the record CLI)."""
    from specdec_core.recorder import pooled_findings

    judged = [(name, analyzed(rec, name)) for label, raw in files for name, rec in parse_recordings(raw, label)]
    return [{"label": name, **r} for name, r in judged], pooled_findings([r for _, r in judged])


def _read(path) -> str:
    """An uploaded recording's text, refused first when it is over the size cap."""
    check_size(Path(path).stat().st_size)
    return Path(path).read_text(encoding="utf-8", errors="replace")


def _texts():
    return common.token_texts(common.get_backend("demo").tokenizer)


class InspectTab:
    def __init__(self):
        self._inputs()
        self._single()
        self._pooled()
        self._wire()

    def _inputs(self):
        """The example decoder and clip to record, or a recording to upload."""
        gr.Markdown("Record **your own** speculative decoder (here: the example zoo in "
                    "`examples/decoders/`) or upload a recording (`.venv/bin/python -m specdec_core record "
                    "FILE.py:FUNCTION AUDIO --out rec.json`). The findings are computed blind, "
                    "from what the two models were fed and scored.")
        gr.HTML(record_help_html(), elem_id="inspect-record-help-box")
        with gr.Row(equal_height=False):
            with gr.Column(scale=2, min_width=300):
                self.decoder = gr.Dropdown(example_choices(), value="correct", label="example decoder",
                                           elem_id="inspect-decoder")
                self.sample = gr.Dropdown(common.sample_choices(), value=common.DEFAULT_SAMPLE,
                                          label="sample clip", elem_id="inspect-sample")
                self.own = self._own_file()
                self.record = gr.Button("Record", variant="primary", elem_id="inspect-record")
            with gr.Column(scale=2, min_width=300):
                self.upload = gr.File(label="or upload a recording (JSON)", file_types=[".json"],
                                      type="filepath", elem_id="inspect-upload")
                self.download = gr.File(label="recording (download)", interactive=False)
                gr.HTML("", js_on_load=size_guard_js(), container=False, padding=False,
                        elem_id="inspect-size-guard")

    def _own_file(self):
        """Your own decoder file where the operator allows it, else a line on how to record it."""
        if own_code_allowed():
            return gr.File(label="or your own decoder (.py with decode(...); this server runs it)",
                           file_types=[".py"], type="filepath", elem_id="inspect-own-file")
        gr.Markdown(f"Your own file: `.venv/bin/python -m specdec_core record FILE.py AUDIO` on your machine. "
                    f"Recording it from this page runs it in this server, so it is an operator setting "
                    f"({OWN_CODE_ENV}=1; never on a Space).", elem_classes="ss-note", elem_id="inspect-own-note")
        return gr.State(None)

    def _single(self):
        """One recording: status, findings, trace, plots and the per-step drill-down."""
        self.status = gr.HTML(status_html("idle", "Pick a decoder and a clip, then Record."),
                              elem_id="inspect-status")
        self.badges = gr.HTML("", elem_id="inspect-badges")
        gr.Markdown("### Findings", elem_classes="ss-h")
        self.findings = gr.HTML(findings_html(None), elem_id="inspect-findings")
        gr.Markdown("### Trace", elem_classes="ss-h")
        self.colour = colour_radio("inspect-colour")   # issue 28: recolours in the browser
        self.tokens = gr.HTML(render_tokens(None, empty=EMPTY), elem_classes="ss-panel ss-tokens-panel",
                              elem_id="inspect-tokens")
        self.text = gr.Textbox(label="final text", lines=2, interactive=False)
        with gr.Row(equal_height=True):
            self.entropy = gr.Plot(entropy_figure(None), show_label=False)
            self.acclen = gr.Plot(accepted_length_figure(None), show_label=False)
        self.timing = gr.Plot(timing_figure(None), show_label=False, elem_id="inspect-timing")
        gr.Markdown("### Drill-down: one step per cloud call", elem_classes="ss-h")
        self.round = gr.Dropdown([], label="step: one per cloud call of the loop (the edge forwards before it, "
                                 "and the call)", elem_id="inspect-round")
        self.drill = gr.HTML(round_html(None, None), elem_id="inspect-drill")
        with gr.Accordion("Token tree of a round (a tree loop: one cloud call verifies a tree of drafts)",
                          open=True):
            self.tree_round = gr.Number(None, label="round (or pick a step above)", precision=0,
                                        elem_id="inspect-tree-round")
            self.tree = gr.HTML(render_tree(None, None), elem_id="inspect-tree")
        self.state = gr.State(None)

    def _pooled(self):
        """Several recordings pooled: the checks that need more than one clip."""
        gr.Markdown("### Pooled over several recordings", elem_classes="ss-h")
        gr.Markdown("Upload two or more recordings (or one `record` output over several clips): "
                    "checks that need more evidence than one clip run over all of them, and the "
                    "acceptance by draft position is pooled.")
        with gr.Row(equal_height=False):
            with gr.Column(scale=2, min_width=300):
                self.pool_upload = gr.File(label="recordings to pool (JSON, several)", file_count="multiple",
                                           file_types=[".json"], type="filepath",
                                           elem_id="inspect-pool-upload")
                self.pool_status = gr.HTML("", elem_id="inspect-pool-status")
                self.pool_findings = gr.HTML(pooled_findings_html(None, 0), elem_id="inspect-pool-findings")
            with gr.Column(scale=3, min_width=300):
                self.pool = gr.HTML(pooled_html([]), elem_id="inspect-pool")
                self.pool_plot = gr.Plot(position_acceptance_figure(None), show_label=False)
        self.pool_upload.upload(self.on_pool, [self.pool_upload],
                                [self.pool_status, self.pool_findings, self.pool, self.pool_plot],
                                api_visibility="private")

    def _wire(self):
        outs = [self.status, self.badges, self.findings, self.tokens, self.text, self.entropy,
                self.acclen, self.round, self.drill, self.download, self.state, self.timing,
                self.tree_round, self.tree]
        scroll = "() => document.getElementById('inspect-status')?.scrollIntoView({block: 'center'})"
        self.record.click(self.on_record, [self.decoder, self.sample, self.own], outs,
                          api_visibility="private", concurrency_id="decode", concurrency_limit=ADMIT
                          ).then(None, js=scroll)
        # an upload is no example: the pickers are emptied, not left on the last one recorded
        self.upload.upload(lambda path: [*self.on_upload(path), None, None], [self.upload],
                           outs + [self.decoder, self.sample], api_visibility="private").then(None, js=scroll)
        self.round.change(self.on_round, [self.state, self.round], [self.drill, self.tree_round, self.tree],
                          api_visibility="private")
        self.tree_round.submit(on_tree, [self.state, self.tree_round], [self.tree_round, self.tree],
                               queue=False, api_visibility="private")
        gr.api(api_record, api_name="record", concurrency_id="decode", concurrency_limit=ADMIT)

    def _show(self, res: dict, label: str) -> list:
        tr, rec = res["trace"], res["recording"]
        errs = sum(f.get("severity") == "error" for f in res["findings"])
        kind = "err" if (errs or not res["ok"]) else "ok"
        counts = recording_counts(tr, rec)
        said = ("not checked by the cloud (no cloud forward)" if not res["findings"] and not counts["calls"]
                else findings_count(res["findings"]))
        detail = res["error"] or f"{said}; {counts_line(counts)}"
        choices = round_choices(rec)
        path = common.write_json(f"recording-{label}", rec)
        texts = _texts()
        return [status_html(kind, f"recorded {label}", detail), config_badges(tr.get("config")),
                # the root error first; the bug-or-numerics line after the findings, never above them
                findings_html(res["findings"], texts, counts["calls"],
                              error=None if res["ok"] else res["error"] or "unknown error")
                + numerics_html(rec.get("numerics"), (res.get("reference") or {}).get("first_divergence")),
                render_tokens(tr, empty=EMPTY), tr.get("text") or "",
                entropy_figure(tr), accepted_length_figure(tr),
                gr.update(choices=choices, value=choices[0][1] if choices else None),
                round_html(rec, 1, texts, counts), path,
                {"recording": rec, "counts": counts, "trace": tr}, timing_figure(tr),
                *on_tree({"trace": tr}, None)]

    def _fail(self, e: Exception) -> list:
        """The reason, and every view emptied: no earlier recording's trace under a red status."""
        return [status_html("err", "could not inspect", common.failure(e)), "", findings_html(None),
                render_tokens(None, empty=EMPTY), "", entropy_figure(None), accepted_length_figure(None),
                gr.update(choices=[], value=None), round_html(None, None), None, None, timing_figure(None),
                None, render_tree(None, None)]

    def on_record(self, decoder, sample, own=None):
        try:
            label = f"{Path(own).stem if own else decoder}-{sample}"
            return self._show(in_slot(record_example, decoder, sample, own=own), label)
        except Exception as e:  # noqa: BLE001
            return self._fail(e)

    def on_upload(self, path):
        try:
            if not path:
                raise UserError("no file uploaded")
            return self._show(analyze_upload(_read(path)), Path(path).stem)
        except Exception as e:  # noqa: BLE001
            return self._fail(e)
        finally:
            release_memory()     # issue 37: a large analysis gives its memory back

    def on_pool(self, paths):
        try:
            paths = [p for p in (paths or []) if p]
            if not paths:
                raise UserError("no file uploaded")
            entries, pooled = analyze_pool([(Path(p).stem, _read(p)) for p in paths])
            pt = pooled_trace([e["trace"] for e in entries])
            errs = sum(f.get("severity") == "error" for f in pooled)
            kind = "err" if errs else "ok"
            return [status_html(kind, f"pooled {len(entries)} recording(s)",
                                f"{len(pooled)} pooled finding(s)"),
                    pooled_findings_html(pooled, len(entries)),
                    pooled_html(entries), position_acceptance_figure(pt)]
        except Exception as e:  # noqa: BLE001
            return [status_html("err", "could not pool", common.failure(e))] + [gr.skip()] * 3
        finally:
            release_memory()

    def on_round(self, state, n):
        """The step's drill-down, and its tree when its cloud call verified a tree round."""
        state = state or {}
        rnd = step_round(state.get("recording"), state.get("trace"), n)
        tree = on_tree(state, rnd) if rnd is not None else (gr.skip(), gr.skip())
        return (round_html(state.get("recording"), n, _texts(), state.get("counts")), *tree)


def on_tree(state, rnd):
    """(round, its tree) of the recorded trace, picked as on the Live tab."""
    return picked_tree((state or {}).get("trace"), rnd, _texts())


def api_record(decoder: str, sample: str) -> dict:
    """Record an example decoder on a bundled clip -> its result entry; errors as one line."""
    try:
        return in_slot(record_example, decoder or "correct", sample or common.DEFAULT_SAMPLE)
    except Exception as e:  # noqa: BLE001
        common.api_error(e)
