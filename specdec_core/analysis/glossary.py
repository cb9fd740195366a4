"""One source of truth for what every number SpecScope shows means: a label, its unit and a
one-line definition (hover text, CLI reports, docs/metrics.md), following the serving engines
(vLLM / SGLang) where they have one. Add an entry here rather than a label or unit in a view."""
from __future__ import annotations

from typing import NamedTuple


class Term(NamedTuple):
    label: str
    unit: str          # "" for plain counts; "%" for shares shown as percentages
    meaning: str


GLOSSARY: dict[str, Term] = {
    "acceptance_rate": Term("draft acceptance rate", "%", "accepted drafts / drafts the cloud judged (vLLM's draft "
                            "acceptance rate)"),
    "mean_accepted_length": Term("mean acceptance length", "tokens per cloud call", "1 + accepted / drafts per "
                                 "verify step: tokens committed per cloud call, the cloud's correction or bonus "
                                 "token included (vLLM's mean acceptance length)"),
    "nodes_per_call": Term("nodes verified per call", "nodes per cloud call", "tree rounds: draft nodes the cloud "
                           "verified in one forward (SGLang's draft tokens per verify); none for chains"),
    "acceptance_by_depth": Term("acceptance by depth", "%", "tree rounds, for depth d: P(a node at depth d accepted "
                                "| the path reached d - 1 and the tree has nodes at depth d)"),
    "per_position_acceptance": Term("per-position acceptance", "%", "for draft position i: P(draft i accepted | "
                                    "drafts 1..i-1 accepted); for a tree, by depth (acceptance by depth), not by "
                                    "sibling slot"),
    "cloud_calls": Term("cloud calls", "calls", "verify forwards of the cloud model (or server requests)"),
    "cloud_call_rate": Term("cloud call rate", "%", "rounds that called the cloud / all rounds"),
    "target_forwards": Term("cloud forwards", "forwards", "forward passes of the cloud (target) model"),
    "draft_forwards": Term("edge forwards", "forwards", "forward passes of the edge (draft) model"),
    "corrections": Term("corrections", "tokens", "cloud tokens that replaced a rejected draft"),
    "bonus_tokens": Term("bonus tokens", "tokens", "cloud tokens added after a fully accepted block"),
    "draft_only_tokens": Term("edge-only tokens", "tokens", "drafts committed without the cloud checking them "
                              "(entropy gate below threshold, or a faulty commit in a verified round)"),
    "accepted_tokens": Term("accepted tokens", "tokens", "drafts the cloud accepted"),
    "rejected_tokens": Term("rejected drafts", "tokens", "drafts dropped after the first rejection"),
    "new_tokens": Term("new tokens", "tokens", "tokens generated after the prompt"),
    "rounds": Term("rounds", "rounds", "draft (and verify) rounds played"),
    "tokens_per_s": Term("speed", "tokens/s", "new tokens / wall-clock time of the decode"),
    "wall_s": Term("wall time", "s", "wall-clock time of the decode"),
    "speedup": Term("speed-up over cloud-only", "×", "median cloud-only decode time / median decode time, both timed "
                    "on quiet repeats interleaved with each other (same clip, same stops); shown with its spread, "
                    "as 'no measurable difference' when the spread covers 1, and as the speed of a different output "
                    "when the texts differ"),
    "cycles": Term("cycles", "cycles", "repeating token loops found in the output"),
    "cache_desyncs": Term("cache desyncs", "checks", "cache checks where cached and recomputed logits differ"),
    "entropy_threshold_nats": Term("entropy threshold", "nats", "draft entropy above which the cloud is called"),
    "share_above_threshold": Term("above threshold", "%", "drafted tokens whose entropy exceeded the threshold"),
    "hanzi_count": Term("汉字", "characters", "Chinese characters in the output"),
    "punct_density": Term("punctuation", "%", "punctuation characters / all characters"),
    "repeat_rate": Term("repeats", "%", "content 2/3-grams that occur more than once"),
    "adjacent_repeats": Term("adjacent repeats", "pairs", "the same CJK character twice in a row"),
    "bytes_up": Term("uplink", "bytes", "bytes sent to the cloud server"),
    "bytes_down": Term("downlink", "bytes", "bytes received from the cloud server"),
    "cloud_only_s": Term("cloud-only time", "s", "wall-clock time of the cloud model decoding alone (greedy, same "
                         "stops; median of repeats interleaved with the decode's)"),
    "decode_s": Term("decode time", "s", "wall-clock time of the speculative decode on quiet repeats (median), "
                     "without the page drawing it between rounds"),
    "ended_by": Term("ended by", "", "why decoding stopped: the end-of-sequence token, the first sentence end, max "
                     "new tokens, a cycle, a fault's stop rule, the Stop button or the time limit"),
    "template_leak": Term("template leak", "", "chat-template markers (<|im_end|> ...) in the output"),
    "chrf": Term("chrF", "", "character F-score against the reference description (0-100)"),
    "emotion_hit": Term("emotion hit", "", "the description names the clip's labelled emotion"),
    "emotion_accuracy": Term("emotion accuracy", "%", "clips whose description names their label"),
    "weighted_f1": Term("weighted F1", "", "MER2024's weighted F1 of the named emotions"),
    "matches_baseline": Term("same as cloud-only", "", "token-for-token the cloud model's own greedy output"),
    "text_vs_cloud": Term("text vs cloud-only", "% chars", "characters the text shares with the cloud-only text "
                          "(difflib ratio)"),
    "bytes_per_call": Term("bytes per cloud call", "bytes", "uplink + downlink bytes / cloud calls"),
    "uplink_calls": Term("requests to the cloud", "calls", "cloud calls that crossed the link"),
    "link": Term("link", "", "how the link time is known: measured (a server), modelled (link knobs) or none"),
    "link_s": Term("link time", "s", "modelled network time of all cloud calls (0 with the link model off)"),
    "request_ms_mean": Term("request time, mean", "ms", "round trip of one cloud server request, mean"),
    "e2e_s": Term("end-to-end time", "s", "wall time + modelled link time"),
    "e2e_ms_per_token": Term("end-to-end per token", "ms", "end-to-end time / new tokens"),
    "ttft_s": Term("time to first token", "s", "decode start to the end of the first round that committed a token"),
    "char_count": Term("characters", "characters", "characters in the output"),
    "punct_count": Term("punctuation marks", "characters", "punctuation characters in the output"),
    "repeat_rate_2": Term("repeated bigrams", "%", "content 2-grams that occur more than once"),
    "repeat_rate_3": Term("repeated trigrams", "%", "content 3-grams that occur more than once"),
    "link_rtt_ms": Term("link round trip", "ms", "modelled network round trip per cloud call"),
    "audio_dependence": Term("audio dependence", "nats", "KL divergence of the cloud's next-token distribution with "
                             "vs without the audio, teacher-forced on the output"),
    "acceptance_by_dependence": Term("acceptance by audio dependence", "", "the acceptance metrics split between "
                                     "drafts at audio-dependent positions (dependence above threshold_nats) and the "
                                     "others"),
    "threshold_nats": Term("audio-dependence threshold", "nats", "a position is audio-dependent when its audio "
                           "dependence exceeds this"),
    "judged": Term("judged drafts", "tokens", "drafts the cloud decided on: the accepted ones and the first rejected "
                   "one of each block (the rest of a rejected block is dropped unjudged)"),
    "drafts": Term("drafted tokens", "tokens", "all tokens drafted in the verify steps counted (vLLM's "
                   "num_draft_tokens)"),
    "judged_acceptance_rate": Term("acceptance per judged draft", "%", "accepted / judged drafts, every position: "
                                   "the whole of which the audio-dependent and other shares are the halves "
                                   "(Leviathan's α)"),
    "audio_acceptance_rate": Term("acceptance, audio-dependent", "%", "accepted / judged drafts at audio-dependent "
                                  "positions"),
    "other_acceptance_rate": Term("acceptance, other", "%", "accepted / judged drafts at the other positions"),
    "cloud_calls_per_token": Term("cloud calls per token", "calls/token", "cloud verify calls / new tokens (lower: "
                                  "more tokens per call)"),
    "audio_free_id": Term("cloud without audio", "token id", "the cloud's top token at this position when the audio "
                          "is taken away"),
    "speed_ratio": Term("speed ratio", "×", "tokens/s now / tokens/s in the baseline run (median over rows, with "
                        "quartiles as its noise range)"),
    "first_divergence": Term("first divergence", "token index", "index of the first token that differs from the "
                             "baseline run's"),
}


def term(key: str) -> Term:
    """The entry for `key`; an unknown key reads as itself with underscores as spaces."""
    return GLOSSARY.get(key) or Term(key.replace("_", " "), "", "")


def hover(key: str) -> str:
    """One line for a tooltip: 'label (unit): meaning'."""
    t = term(key)
    unit = f" ({t.unit})" if t.unit else ""
    return f"{t.label}{unit}: {t.meaning}" if t.meaning else f"{t.label}{unit}"


def markdown_table() -> str:
    """The glossary as a Markdown table (docs/metrics.md carries it; a test keeps them equal)."""
    rows = ["| key | label | unit | meaning |", "|---|---|---|---|"]
    rows += [f"| `{k}` | {t.label} | {t.unit or '–'} | {t.meaning} |" for k, t in GLOSSARY.items()]
    return "\n".join(rows)
