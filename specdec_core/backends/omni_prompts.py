"""Prompts for the Qwen2.5-Omni backend.

The system turn is the official Omni system prompt, unchanged: the checkpoints were tuned with it
for the audio path, and other system texts degrade audio understanding. All task constraints
live on the user side (seed 000 section 4: acoustic cues -> one emotion -> a minimal reason)."""
from __future__ import annotations

from specdec_core.errors import ConfigError

SYSTEM_PROMPT = ("You are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, capable "
                 "of perceiving auditory and visual inputs, as well as generating text and speech.")

INSTRUCTIONS = {
    "detailed": ("请只用一句话（30到70个汉字）描述这段语音的说话人情绪：先写听到的声学线索（音调、"
                 "语速、音量、停顿），再给出一个情绪（中性、生气、高兴、悲伤、担忧、惊讶之一），"
                 "最后用极简的理由收尾。不要寒暄，不要提问，不要分点。"),
    "concise": ("请用一句话（8到16个汉字）概括说话人的情绪：声学线索加一个情绪词。"
                "不要寒暄，不要解释。"),
}

# The official template's behaviour for what we send (system text, user audio + text), so a
# processor saved without a chat template renders the same prompt the hub processor does.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'audio' or 'audio' in content %}<|audio_bos|><|AUDIO|><|audio_eos|>"
    "{% elif content['type'] == 'image' or 'image' in content %}<|vision_bos|><|IMAGE|><|vision_eos|>"
    "{% elif content['type'] == 'video' or 'video' in content %}<|vision_bos|><|VIDEO|><|vision_eos|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def instruction(prompt_type: str) -> str:
    if prompt_type not in INSTRUCTIONS:
        raise ConfigError(f"prompt_type must be one of {', '.join(INSTRUCTIONS)}, got {prompt_type!r}")
    return INSTRUCTIONS[prompt_type]


def conversation(prompt_type: str) -> list[dict]:
    """System = the official Omni prompt; user = [the clip, the instruction]."""
    return [
        {"role": "system", "content": [{"type": "text", "text": SYSTEM_PROMPT}]},
        {"role": "user", "content": [{"type": "audio", "audio": "clip"},
                                     {"type": "text", "text": instruction(prompt_type)}]},
    ]
