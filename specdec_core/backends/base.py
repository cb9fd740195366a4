"""What every backend provides: two models that share a tokenizer, a prompt builder, stop ids."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from specdec_core.decoding.runner import ModelRunner


@dataclass
class PromptInputs:
    input_ids: torch.Tensor                              # [1, L], the whole prompt
    prefill_kwargs: dict = field(default_factory=dict)   # extra kwargs for the prefill only
    info: dict = field(default_factory=dict)             # shown in the UI: prompt text, prosody

    @property
    def length(self) -> int:
        return int(self.input_ids.shape[1])


class Backend:
    name: str = "base"
    edge = None
    cloud = None
    tokenizer = None
    stop_ids: list[int] = []
    # Size of the vocabulary both models share; logits are compared on it.
    shared_vocab: int | None = None
    # Whether build_inputs needs audio (the hf text backend does not).
    needs_audio: bool = True

    def build_inputs(self, audio, prompt_type: str) -> PromptInputs:  # pragma: no cover
        raise NotImplementedError

    def make_runner(self, model, role: str) -> ModelRunner:
        return ModelRunner(model, vocab_size=self.shared_vocab)

    def counterfactual_inputs(self, prompt: PromptInputs) -> PromptInputs | None:
        """`prompt` with the audio taken away (same length where possible), for the audio
        dependence of each token (decoding/dependence.py). None: this backend cannot."""
        return None

    def head_rows(self) -> int:
        """The output-head rows both models have: logits are compared on them."""
        return min(m.get_output_embeddings().weight.shape[0] for m in (self.edge, self.cloud))

    def describe(self) -> dict:
        def n(m):
            return sum(p.numel() for p in m.parameters())
        return {"backend": self.name, "edge_params": n(self.edge), "cloud_params": n(self.cloud),
                "dtype": str(next(self.cloud.parameters()).dtype).removeprefix("torch.")}
