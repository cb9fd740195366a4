"""One vocabulary of findings: the Finding type, its one constructor, and the registry of codes.

Every finding in SpecScope (the built-in decoder's runs, recordings of users' loops, the pair
check, batch, the regression watch) is a `Finding`: a dict with exactly the keys

    code, severity (error | warning | info), title, detail, cause, fix, evidence, explained_by

`explained_by` is the code of the finding whose evidence explains this one (a symptom under its
mechanism, a consequence under its cause), or None for a root finding. A code means one
mechanism wherever it appears; `REGISTRY` lists each code with its default severity, the
mechanism and the evidence that triggers it (docs/findings.md is generated from it).

`finding()` is the only constructor in the tree; `from_json()` reads findings from files written
by older releases (which carried `key` instead of, or beside, `code`, and no `explained_by`).
"""
from __future__ import annotations

from dataclasses import dataclass

SEVERITIES = ("error", "warning", "info")
KEYS = ("code", "severity", "title", "detail", "cause", "fix", "evidence", "explained_by")


@dataclass(frozen=True)
class Code:
    """One registry entry. `severity` is the default; a check may lower or raise it only where
    `severities` lists the alternative (e.g. `lossy_accept`: info, warning past the top-5)."""
    code: str
    severity: str
    mechanism: str
    trigger: str
    source: str = "decoder, recorder"
    severities: tuple = ()


REGISTRY: dict[str, Code] = {}


def register(code: str, severity: str, mechanism: str, trigger: str, source: str = "decoder, recorder",
             severities: tuple = ()) -> Code:
    assert severity in SEVERITIES, severity
    assert code not in REGISTRY, f"finding code {code!r} registered twice"
    REGISTRY[code] = c = Code(code, severity, mechanism, trigger, source, tuple(severities) or (severity,))
    return c


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


def from_json(d: dict) -> Finding:
    """A finding read from a file, old or new: `key` (older releases) becomes `code`, a missing
    `explained_by` is None, unknown codes are kept as they are (a newer release may have them)."""
    code = d.get("code") or d.get("key") or "unknown"
    sev = d.get("severity") if d.get("severity") in SEVERITIES else "info"
    return Finding(code=code, severity=sev, title=str(d.get("title", "")), detail=str(d.get("detail", "")),
                   cause=str(d.get("cause", "") or ""), fix=str(d.get("fix", "") or ""),
                   evidence=d.get("evidence") or {}, explained_by=d.get("explained_by"))


# -- heads (issue 35) ------------------------------------------------------------------------
register("stale_features", "warning",
         "a head drafter's KV entries for accepted tokens were computed from its own predicted "
         "features instead of the cloud's last hidden states (vllm #14649): lossless, lower acceptance",
         "the features behind the head's cache differ from the cloud's hidden states at the same "
         "positions; the finding measures the first-draft acceptance with both",
         source="decoder")
# `acceptance_rule` is the recorder's sampling-check code (issue 33 registers it with the other
# sampling codes); the built-in decoder's raw-q check reports the same mechanism under it.
if "acceptance_rule" not in REGISTRY:
    register("acceptance_rule", "error",
             "the sampling rule accepted against min(1, p/q) with a q other than the drafts' "
             "distribution (e.g. q from raw logits, transformers #47932): not lossless",
             "accept indicators inconsistent with min(1, p/q); in the built-in decoder, the q "
             "handed to the rule differs from the distribution the drafts were sampled from")
