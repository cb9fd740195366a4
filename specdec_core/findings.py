"""One vocabulary of findings: the Finding type, its one constructor `finding()`, `from_json()`
for files of older releases (`key` for `code`), and the registry of codes that
docs/findings.md is generated from (the fields and what they mean: docs/findings.md)."""
from __future__ import annotations

from dataclasses import dataclass, replace

SEVERITIES = ("error", "warning", "info")
KEYS = ("code", "severity", "title", "detail", "cause", "fix", "evidence", "explained_by")


@dataclass(frozen=True)
class Code:
    """One registry entry. `severity` is the default; a check may lower or raise it only where
    `severities` lists the alternative (e.g. `lossy_accept`: info, warning past the top-5). The
    facts the consumers read (docs/recorder.md, "Adding a check") follow."""
    code: str
    severity: str
    mechanism: str
    trigger: str
    source: str = "decoder, recorder"
    severities: tuple = ()
    root: int = 0             # rank as a root cause (1 = most fundamental; 0 = not a root)
    explains: tuple = ()      # the codes its evidence explains (recorder/report/roots.py)
    end: bool = False         # about the run's end: nested under an incomplete recording's cut
    text: bool = False        # a text symptom: the model's own when the loop is shown exact
    context: bool = False     # the models read a context other than the committed text
    dedupes: tuple = ()       # (mark, code, key): where evidence has mark, code's findings with key go
    named: tuple = ()         # (key, title, fix): the causes the report names inside this code
    trace: str = ""           # the analysis/diagnostics check that emits it


REGISTRY: dict[str, Code] = {}


def register(code: str, severity: str, mechanism: str, trigger: str, source: str = "decoder, recorder",
             **facts) -> Code:
    """One code and its facts (the fields of Code)."""
    c = Code(code, severity, mechanism, trigger, source, **facts)
    assert severity in SEVERITIES, severity
    assert code not in REGISTRY, f"finding code {code!r} registered twice"
    assert bool(c.root) == bool(c.explains), f"{code}: a root has a rank and what it explains"
    REGISTRY[code] = c = replace(c, severities=tuple(c.severities) or (severity,), explains=tuple(c.explains))
    return c


def roots() -> list[Code]:
    """The root codes, most fundamental first (a root explained by an earlier one passes
    nothing on)."""
    return sorted((c for c in REGISTRY.values() if c.root), key=lambda c: c.root)


def fact(code: str, name: str):
    """A per-code fact (`end`, `text`, ...) of a registered code; False/() for unknown codes."""
    c = REGISTRY.get(code)
    return getattr(c, name) if c is not None else Code.__dataclass_fields__[name].default


class Finding(dict):
    """A finding. A dict (JSON as it is, `f["code"]`) with attribute access to its keys."""
    __slots__ = ()

    def __getattr__(self, name):
        if name in KEYS:
            return self[name]
        raise AttributeError(name)


def finding(code: str, title: str, detail: str = "", cause: str = "", fix: str = "",
            evidence: dict | None = None, severity: str | None = None,
            explained_by: str | None = None) -> Finding:
    """The one constructor. `code` must be registered; `severity` defaults to the registry's."""
    spec = REGISTRY.get(code)
    if spec is None:
        raise KeyError(f"finding code {code!r} is not in specdec_core.findings.REGISTRY")
    severity = severity or spec.severity
    if severity not in spec.severities:
        raise ValueError(f"{code}: severity {severity!r} not allowed (registry: {spec.severities})")
    return Finding(code=code, severity=severity, title=title, detail=detail, cause=cause, fix=fix,
                   evidence=evidence or {}, explained_by=explained_by)


ALIASES = {"acceptance_cliff": "acceptance_collapse"}    # old names, read for one release (docs/audit.md)


def from_json(d: dict) -> Finding:
    """A finding read from a file, old or new: `key` (older releases) becomes `code`, a missing
    `explained_by` is None, unknown codes are kept as they are (a newer release may have them)."""
    code = d.get("code") or d.get("key") or "unknown"
    sev = d.get("severity") if d.get("severity") in SEVERITIES else "info"
    return Finding(code=ALIASES.get(code, code), severity=sev, title=str(d.get("title", "")), detail=str(d.get("detail", "")),
                   cause=str(d.get("cause", "") or ""), fix=str(d.get("fix", "") or ""),
                   evidence=d.get("evidence") or {}, explained_by=d.get("explained_by"))


# symptoms read in the output text, and those read in the contexts (the roots' `explains`)
TEXT_SYMPTOMS = ("doubling", "cycle", "punct_flood", "template_leak", "length", "no_stop",
                 "acceptance_collapse", "edge_mishears")
CONTEXT_SYMPTOMS = ("context_mismatch", "hidden_draft_processing", "unverified_end", "missed_eos",
                    "lossless_violation", "rank_window_exceeded", "acceptance_rule",
                    "residual_mismatch", "off_by_one", "draft_schedule", "sibling_resampled",
                    "sibling_distribution", "stale_draft_context", "unexplained_draft") + TEXT_SYMPTOMS

# -- the registry (severities past the default: where a check chooses). Sources: decoder = the built-in
# decoder, recorder = a user's loop (same checks), pair = the pair check, watch = regression watch/batch.
register("stale_cache", "error", "a cache holds tokens that are not the committed text: it was not "
         "rolled back (cropped) after a correction, or not compacted to a tree's accepted path",
         "a forward attends to a cache position written before (or by) the decision that replaced "
         "its token; after a tree verify, the next forward's cache holds a rejected node's keys",
         root=5, explains=CONTEXT_SYMPTOMS, context=True)
register("context_mismatch", "error", "the models read a context that is not the verified text "
         "(a token fed twice, a block appended to the input twice, a token missing)",
         "a forward's context differs from the committed sequence at a position the cloud had decided, "
         "the edge drafted from a context other than the one verified, or committed tokens repeat the block before them",
         root=6, explains=CONTEXT_SYMPTOMS[1:], context=True)
register("position_error", "error", "position ids / cache positions / attention mask do not "
         "continue the cache (positions reset, a mask built for the new tokens only)",
         "position_ids or cache_position != cache length + arange(n), or a mask shorter than the context",
         root=4, explains=CONTEXT_SYMPTOMS, context=True)
register("hidden_draft_processing", "error", "the draft logits are changed before the pick (a second "
         "temperature, penalties, a filter) beyond the declared rule",
         "greedy declared and drafts that are not the argmax of the edge row that made them (a row not "
         "fed the draft, on the verified context); or the maximum-likelihood draft temperature far "
         "from the declared one (LLR >= 6)", severities=("error", "warning"),
         root=18, explains=("punct_flood", "acceptance_collapse", "cycle", "doubling", "edge_mishears"))
register("draft_filter", "info", "drafts are sampled from the edge's top-R only (a top-k filter)",
         "every sampled draft inside the edge's top-R, unlikely under the full distribution")
register("draft_schedule", "info", "the decoder chooses its draft length itself (a schedule)",
         "verified rounds draft lengths varying past k+1")
register("off_by_one", "error", "an off-by-one in the draft loop or the acceptance count",
         "a round drafted more than k or committed more than k+1 tokens",
         root=7, explains=("lossless_violation", "unverified_end") + TEXT_SYMPTOMS, context=True)
register("lossless_violation", "error", "the acceptance test is not the declared lossless rule",
         "greedy declared and committed tokens that are not the argmax of the cloud row that decided them",
         root=10, explains=TEXT_SYMPTOMS, named=(
             ("penalty_not_applied", "the declared repetition penalty is not applied",
              "apply the declared penalty to the cloud's logits of every verified slot (given the "
              "sequence and the drafts before it) before its argmax / sampling"),
             ("first_draft_unverified", "the first draft of each block is committed unverified",
              "compare draft 0 with the verify row at the position before it (row 0 of the "
              "block), as every other draft"),
             ("edge_correction_unjudged", "the edge's corrections are committed without the cloud's verdict",
              "judge every draft by the cloud's verify row, the edge's own tokens too: a lower "
              "level's check (the edge over an n-gram) verifies nothing for the cloud")))
register("rank_window_exceeded", "error", "the acceptance test accepts past the declared rank window",
         "an accepted draft ranked by the cloud beyond rank_threshold", root=11, explains=TEXT_SYMPTOMS)
register("lossy_accept", "info", "the cost of a declared rank window: drafts the cloud ranked 2nd or "
         "lower were accepted", "accepted drafts of cloud rank 2..rank_threshold",
         severities=("info", "warning"))
register("missed_eos", "error", "a stop id was committed and decoding went on (stop not checked by id "
         "on every committed token)", "a declared stop id inside the output before its end",
         root=8, explains=TEXT_SYMPTOMS, end=True)
register("unverified_end", "error", "the run ended on tokens the cloud never verified (a stop on "
         "decoded draft text, or the loop ended after drafting)",
         "output tail never scored by a cloud forward, or a stop on a non-stop token before the limit",
         root=9, explains=TEXT_SYMPTOMS, end=True)
register("dropped_output", "error", "tokens the loop returned are not what the models were fed",
         "the returned ids differ from the sequence the last forwards were fed", end=True,
         context=True)
register("cycle", "error", "a deterministic draft loop revisits the same state: a short pattern repeats",
         "the committed text repeats a short pattern (declared cycle detection)",
         severities=("error", "warning"), text=True, trace="cycles")
register("doubling", "error", "tokens appended to the input twice: phrases written twice in a row",
         "three or more spans of 1-8 hanzi written twice in a row",
         severities=("error", "warning"), text=True, trace="doubling")
register("template_leak", "error", "the decoder ran past <|im_end|> into the next chat turn",
         "chat-template markers in the output text",
         severities=("error", "warning"), end=True, text=True, trace="template_leak")
register("punct_flood", "error", "an over-sharp draft distribution or position errors make punctuation win",
         "more than 40% of the output characters are punctuation",
         severities=("error", "warning"), text=True, trace="punct_flood")
register("length", "info", "the description is too short or too long for its prompt type",
         "hanzi count outside the prompt type's length band", end=True, trace="length")
register("no_stop", "warning", "stop ids not recognised: no stop before max_new_tokens",
         "the run ended on the length limit", end=True, trace="no_stop")
register("acceptance_collapse", "warning", "the drafts stop matching from an output position on (a "
         "drafter past its length limit or window, placeholder drafts verified anyway) or overall "
         "(a wrong context or a distorted distribution): lossless, drafting and verifying for nothing",
         "the verified rounds from a position to the end accept <= 10% (their first 6 none) after "
         "rounds that accepted 30% or more, or acceptance below 30% over 3+ cloud calls (with a "
         "declared prompt type)", end=True)
register("always_verify", "info", "the entropy threshold never lets a block through",
         "entropy-gated run with a cloud call on every block", trace="entropy_gate")
register("never_verify", "info", "the entropy threshold is above every draft entropy: the output is "
         "the edge alone", "entropy-gated run with no cloud call", trace="entropy_gate")
register("edge_mishears", "warning", "the edge drafts as if it had not heard the clip",
         "rejections concentrated at audio-dependent positions (greedy runs)",
         trace="check_edge_mishears")
register("numeric_divergence", "info", "the run and its reference differ by numerics, not a bug",
         "first divergence at a near-tie with no error finding", source="decoder (baseline)")
register("sampling_rule", "info", "an exact acceptance rule identified (sample-and-match; argmax drafts with a one-hot q)",
         "sampled run whose accept/reject pattern is sample-and-match")
register("acceptance_rule", "error", "the probabilistic acceptance test is not min(1, p/q)",
         "accept/reject decisions inconsistent with p/q under the recorded logits (a test pooled over "
         "judged drafts); on a verifier that generates its own tokens, tokens committed in a run after "
         "one that differs from the cloud's own token (`n_off_context`: judged on a row of another "
         "context; certain, not statistical)",
         root=12, explains=("residual_mismatch",) + TEXT_SYMPTOMS)
register("greedy_draft_sampling", "error", "drafts picked greedily while sampling is declared: the "
         "p/q test is biased", "sampled run with every draft the edge's argmax",
         root=15, explains=("hidden_draft_processing",) + TEXT_SYMPTOMS,
         dedupes=(("argmax_drafts", "hidden_draft_processing", "effective_temperature"),))
register("residual_mismatch", "error", "the correction is not drawn from the residual max(0, p - q)",
         "corrections outside the residual's support", root=13, explains=TEXT_SYMPTOMS)
register("loop_overhead", "warning", "the loop spends its time outside the model forwards",
         "wall time far above the sum of forward times", end=True)
register("recomputed_context", "warning", "the cache is not reused: each forward recomputes the context",
         "forwards that feed the whole context again")
register("vocab_mismatch", "error", "edge and cloud token ids index different vocabularies",
         "the recorded logits widths / tokenizers disagree on drafted ids", root=1, explains=CONTEXT_SYMPTOMS)
register("vocab_widths", "info", "edge and cloud heads differ in width (padding rows)",
         "different logits widths with the same tokenizer", source="recorder, pair",
         severities=("info", "warning"))
register("audio_missing", "warning", "a model decodes without the audio it should hear",
         "a prefill without audio features", severities=("warning", "error"),
         root=17, explains=("edge_mishears",))
register("batch_layout", "warning", "a batched recording whose rows could not be read (nothing judged)",
         "batch > 1 without a 2D padding mask, or the clip's prompt in no single row")
register("batch_rows", "info", "a batched decode: every row judged on its own",
         "forwards with batch > 1 (rows, padding and positions read per row)")
register("zeroed_kv", "error", "a row's cache holds slots whose keys were zeroed, not masked: a "
         "ragged rollback zeroed the rejected tail, and each such slot still adds e^0 to the softmax "
         "denominator (mlx-vlm #1962)", "a batched forward attends (attention mask 1) to cached "
         "slots whose keys are all zero", source="recorder",
         root=2, explains=("position_error",) + CONTEXT_SYMPTOMS, context=True)
# -- blocks added by other issues below
# -- trees (issue 34)
register("tree_mask", "error", "the tree attention mask lets a node see a node that is not its "
         "ancestor (a sibling, another branch)", "in a tree verify forward, a node's mask row sees a "
         "column outside its parent's row plus its parent",
         root=3, explains=("position_error",) + CONTEXT_SYMPTOMS, context=True)
register("tree_positions", "error", "tree nodes are given positions by slot, not prefix + depth",
         "in a tree verify forward, a node's position != the position after the prefix + its depth",
         root=2, explains=("position_error", "tree_mask") + CONTEXT_SYMPTOMS, context=True)
register("tree_inferred", "info", "the tree of a verify forward was inferred: no mask argument",
         "a tree forward (repeated positions) without a 4D attention_mask", "recorder")
register("draft_context", "warning", "drafting reads a context other than the node's "
         "ancestors (draft slots instead of parents): lossless, fewer drafts accepted",
         "an edge forward drafting tree nodes whose mask or positions are not its ancestors'",
         context=True)

# -- heads (issue 35) ------------------------------------------------------------------------
register("stale_features", "warning",
         "a head drafter's KV entries for accepted tokens were computed from its own predicted "
         "features instead of the cloud's last hidden states (vllm #14649): lossless, lower acceptance",
         "the features behind the head's cache differ from the cloud's hidden states at the same "
         "positions; the finding measures the first-draft acceptance with both",
         source="recorder", root=16, explains=("acceptance_collapse",))
# raw_q (transformers #47932) is reported under the sampling checks' `acceptance_rule` code

# -- drafters with their own tokenizer (issue 36) --------------------------------------------
register("edge_tokenizer", "info", "the edge drafts in its own vocabulary: its forwards are read "
         "through text in the cloud's ids (universal assisted generation)",
         "the recording's edge has a vocabulary other than the cloud's and its tokenizer's texts",
         source="recorder")
# (an edge whose re-tokenized prompt lost the audio condition tokens: `audio_missing`, warning)

# -- what the recorder could not see (issue 41) ---------------------------------------------------
register("not_judged", "info", "part of the run could not be judged from what was recorded "
         "(no cloud logits, drafts the checks cannot read): said with the count, never guessed",
         "forwards or drafts the recorder saw without what a check needs",
         source="recorder", severities=("info", "warning"))

# -- recordings cut short (issue 43) ---------------------------------------------------------
register("incomplete_recording", "error", "the recording stops before the output does (a file cut "
         "short, hooks removed early, a decode that crashed): what the missing forwards did cannot "
         "be judged", "2+ output ids at the end that no recorded forward was fed or scored",
         source="recorder")

# -- issue 42 (trees under sampling; what could not be judged) --------------------------------
register("sibling_resampled", "error", "a tree loop's residual is not updated between siblings: a "
         "rejected child's mass stays in the distribution the next child and the correction are "
         "drawn from", "a correction equal to a child rejected at the same tree node (probability 0 "
         "under SpecInfer's / EAGLE's sibling rule)", source="recorder",
         root=14, explains=("sibling_distribution",) + TEXT_SYMPTOMS)
register("sibling_distribution", "error", "a multi-candidate tree rule that does not emit the cloud's "
         "distribution", "the emitted token at tree nodes with children is one of them more (or less) "
         "often than the cloud's p gives (exact test, pooled over nodes)", source="recorder")
register("verify_generates", "warning", "the verifier generates the cloud's tokens one forward each "
         "(k + 1 per round) instead of scoring the drafted block in one forward: lossless, slower "
         "than decoding alone", "a run of one-token cloud forwards after each drafting run, each fed "
         "the cloud's own previous token", source="recorder")

# -- loops the recorder had not seen (issue 56) -------------------------------------------------
register("stale_draft_context", "error", "drafts proposed for a context were made from another one: "
         "a block drafted ahead re-proposed after a rejection, a drafter fed rejected tokens",
         "greedy drafts that the round's edge forward was fed (it did not make them) and that are the "
         "argmax of an earlier edge row at the same position whose context differs from the verified one",
         source="recorder", root=19, explains=("acceptance_collapse",))
register("unexplained_draft", "warning", "drafts that no recorded edge row could have made: said "
         "where, not given a cause", "greedy drafts that the round's edge forward was fed and that no "
         "earlier edge row gives at the same position", source="recorder")
register("verify_rows_misaligned", "error", "a verify keeps one row per draft (k, not k + 1): the "
         "loop reads each row one slot off and the first draft's judge is missing",
         "verify forwards fed k drafts that return k rows starting at the first draft's own position, "
         "with corrections equal to the argmax of their own position's row", source="recorder",
         root=2, explains=CONTEXT_SYMPTOMS)
