"""The demo pair's chat prompt: what the shipped models were trained on (devtools/demo_corpus.py
writes the training documents in this format) and what the demo backend feeds them."""
from __future__ import annotations

from specdec_core.audio import conditions as C

SYSTEM_PROMPT = "你是情感分析助手。"
INSTRUCTIONS = {"detailed": "请描述说话人的情绪。", "concise": "请简要概括说话人的情绪。"}
TYPE_TOKENS = {t: f"<{t}>" for t in C.PROMPT_TYPES}
IM_START, IM_END, EOT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"


def prompt_text(cond_tokens: list[str], prompt_type: str) -> str:
    """The chat prompt up to and including the assistant header (what the models are fed)."""
    return (f"{IM_START}system\n{SYSTEM_PROMPT}{IM_END}\n"
            + user_turn(cond_tokens, prompt_type) + f"{IM_START}assistant\n")


def user_turn(cond_tokens: list[str], prompt_type: str) -> str:
    return (f"{IM_START}user\n{''.join(cond_tokens)}{TYPE_TOKENS[prompt_type]}"
            f"{INSTRUCTIONS[prompt_type]}{IM_END}\n")
