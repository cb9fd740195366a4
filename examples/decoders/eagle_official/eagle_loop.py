"""EAGLE's official decoding loop (EAGLE-2 dynamic tree, greedy or sampling), adapted to the demo
pair and the shipped demo head (specdec_core/demo/head.py). The entry files next to this one
(correct.py, correct_toplevel.py, ...) call `eagenerate` with one variation each.

Source:  https://github.com/SafeAILab/EAGLE
Commit:  cb7e0841fe0c206c6ed74a197ad5e2a1f13f5a2b
Files:   eagle/model/ea_model.py (`forward`, `eagenerate`), eagle/model/utils.py
         (`prepare_logits_processor`, `initialize_tree`, `tree_decoding`, `evaluate_posterior`,
         `update_inference_inputs`), eagle/model/cnets.py (`topK_genrate`, `init_tree`, `reset`)
Licence: Apache License 2.0. Copyright 2025 SafeAI Lab (SAIL). Licensed under the Apache
         License, Version 2.0 (the "License"); you may not use this file except in compliance with
         the License. You may obtain a copy of the License at
         http://www.apache.org/licenses/LICENSE-2.0. Unless required by applicable law or agreed
         to in writing, software distributed under the License is distributed on an "AS IS"
         BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
         License for the specific language governing permissions and limitations under the
         License. Changes: see the `# GLUE:` lines.

The code and conventions are EAGLE's: the head is fed `input_ids[:, 1:]` (at head position t the
cloud's feature of t with the token t+1), the verifier is called as `base_model.model(...)` then
`base_model.lm_head(...)`, the cloud's KV of the accepted path is copied down in place, and the
stop is checked after the whole accepted path is appended.

GLUE (what the demo pair needs, nothing else):
- EAGLE's own Llama reads the tree mask from an attribute; transformers' Qwen2 takes a 4D
  `attention_mask`, so `tree_attention` builds it (the causal past, the tree mask bottom-right,
  as EAGLE's `_prepare_decoder_attention_mask` does).
- EAGLE's preallocated KV buffer (`past_key_values_data`, `current_length_data`) is a transformers
  `DynamicCache`: the same slots are copied in place, the length is set by `crop`.
- EAGLE's head (`cnets.Model`) embeds its ids itself and owns fc + a decoder layer; the demo head
  takes (features, token embeddings) and its layer ends in its own norm, so `EaLayer` embeds with
  the cloud's embeddings and `norm` is the identity. The head's cache is a DynamicCache too:
  `stable_kv` is its length before the tree (EAGLE keeps the legacy tuple of that moment).
- `eos_token_id` -> the run's `stop_ids`; `Variant` switches the verifier call and the defects of
  the twins (each entry file names the one it changes).
"""
import random
from dataclasses import dataclass

import torch
from transformers import DynamicCache
from transformers.generation.logits_process import (LogitsProcessorList, RepetitionPenaltyLogitsProcessor,
                                                    TemperatureLogitsWarper, TopKLogitsWarper,
                                                    TopPLogitsWarper)


@dataclass
class Variant:                       # GLUE: one switch per entry file
    toplevel_verifier: bool = False  # call base_model(...) instead of base_model.model + lm_head
    copy_down: bool = True           # twin: KV of the accepted path not copied down
    slot_features: bool = False      # twin: head fed the first tree slots' features (vllm #14649)
    eagle_stop: bool = False         # twin: EAGLE's own stop (after the whole accepted path)
    edge_drafted: bool = False       # the tree drafted by the edge model instead of the head


def prepare_logits_processor(temperature=0.0, repetition_penalty=0.0, top_p=0.0, top_k=0):
    processor_list = LogitsProcessorList()
    if temperature > 1e-5:
        if temperature >= 1e-5 and temperature != 1.0:
            processor_list.append(TemperatureLogitsWarper(temperature))
        if repetition_penalty > 1.0:
            processor_list.append(RepetitionPenaltyLogitsProcessor(repetition_penalty))
        if 1e-8 <= top_p < 1.0:
            processor_list.append(TopPLogitsWarper(top_p))
        if top_k > 0:
            processor_list.append(TopKLogitsWarper(top_k))
    return processor_list


def tree_attention(tree_mask, past, n, dtype, device):
    """GLUE: EAGLE's tree mask (bottom-right of the causal mask) as a 4D additive mask."""
    visible = torch.ones(n, past + n, dtype=torch.bool).tril(past)
    if tree_mask is not None:
        t = tree_mask[0, 0].bool().cpu()
        visible[-t.shape[0]:, -t.shape[1]:] = t
    out = torch.zeros(visible.shape, dtype=dtype)
    out.masked_fill_(~visible, torch.finfo(dtype).min)
    return out[None, None].to(device)


def kv_data(cache):                  # GLUE: EAGLE's past_key_values_data, per layer
    return [t for layer in cache.layers for t in (layer.keys, layer.values)]


def set_length(cache, n):            # GLUE: current_length_data.fill_(n)
    drop = cache.get_seq_length() - n
    if drop > 0:
        cache.crop(-drop)


class EaLayer:
    """cnets.Model's tree drafting around the demo head (GLUE: see the module doc)."""

    def __init__(self, head, base_model, total_tokens=12, depth=3, top_k=4):
        self.head, self.base_model = head, base_model
        self.embed_tokens = base_model.get_input_embeddings()
        self.lm_head = base_model.get_output_embeddings()
        self.norm = torch.nn.Identity()
        self.logsoftmax = torch.nn.LogSoftmax(dim=-1)
        self.total_tokens, self.depth, self.top_k = total_tokens, depth, top_k
        self.config = type("C", (), {"vocab_size": 1, "draft_vocab_size": 1})()
        self.stable_kv = self.tree_mask = None
        self.init_tree()

    def init_tree(self):
        self.tree_mask_init = torch.eye(self.top_k, device=self.embed_tokens.weight.device)[None, None]
        self.position_ids = torch.zeros(self.top_k, device=self.embed_tokens.weight.device, dtype=torch.long)
        self.tree_mask_init = self.tree_mask_init.to(self.embed_tokens.weight.device)

    def reset(self):
        self.tree_mask = None

    def reset_kv(self):
        self.stable_kv = None

    def __call__(self, hidden_states, input_ids, past_key_values=None, position_ids=None, use_cache=True):
        # GLUE: cnets.Model.forward -> the demo head (features, embeddings, cache, positions, mask)
        cache = past_key_values if past_key_values is not None else DynamicCache()
        past, n = cache.get_seq_length(), input_ids.shape[1]
        if position_ids is None:
            position_ids = torch.arange(past, past + n, device=input_ids.device)
        mask = tree_attention(self.tree_mask, past, n, hidden_states.dtype, hidden_states.device)
        out = self.head(hidden_states, self.embed_tokens(input_ids), cache=cache,
                        position_ids=position_ids.reshape(1, -1), attention_mask=mask)
        return out, cache

    @torch.no_grad()
    def topK_genrate(self, hidden_states, input_ids, head, logits_processor):
        input_ids = input_ids.to(hidden_states.device)
        total_tokens = self.total_tokens
        depth = self.depth
        top_k = self.top_k

        sample_token = input_ids[:, -1]

        scores_list = []
        parents_list = []
        ss_token = []

        input_ids = input_ids[:, 1:]
        input_ids = input_ids.to(hidden_states.device)

        len_posi = input_ids.shape[1]
        self.reset()

        if hasattr(self, "stable_kv") and self.stable_kv is not None:
            kv_len = self.stable_kv                       # GLUE: the tree's slots dropped
            set_length(self.cache, kv_len)
            out_hidden, past_key_values = self(hidden_states, input_ids=input_ids[:, kv_len:],
                                               past_key_values=self.cache, use_cache=True)
        else:
            out_hidden, past_key_values = self(hidden_states, input_ids=input_ids, use_cache=True)
        self.cache, self.stable_kv = past_key_values, past_key_values.get_seq_length()   # GLUE
        last_hidden = out_hidden[:, -1]

        last_headout = self.lm_head(self.norm(last_hidden))

        last_p = self.logsoftmax(last_headout)
        top = torch.topk(last_p, top_k, dim=-1)
        topk_index, topk_p = top.indices, top.values
        scores = topk_p[0]
        scores_list.append(scores[None])
        parents_list.append(torch.zeros(1, dtype=torch.long, device=scores.device))
        ss_token.append(topk_index)
        input_ids = topk_index
        input_hidden = last_hidden[None].repeat(1, top_k, 1)
        tree_mask = self.tree_mask_init
        topk_cs_index = torch.arange(top_k, device=self.embed_tokens.weight.device)

        for i in range(depth):
            self.tree_mask = tree_mask
            position_ids = len_posi + self.position_ids
            out_hidden, past_key_values = self(input_hidden, input_ids=input_ids, past_key_values=past_key_values,
                                               position_ids=position_ids, use_cache=True)
            len_posi += 1

            bias1 = top_k if i > 0 else 0
            bias2 = max(0, i - 1)
            bias = 1 + top_k ** 2 * bias2 + bias1
            parents = (topk_cs_index + bias)
            parents_list.append(parents)

            last_headout = self.lm_head(self.norm(out_hidden[0]))
            last_p = self.logsoftmax(last_headout)

            top = torch.topk(last_p, top_k, dim=-1)
            topk_index, topk_p = top.indices, top.values

            cu_scores = topk_p + scores[:, None]

            topk_cs = torch.topk(cu_scores.view(-1), top_k, dim=-1)
            topk_cs_index, topk_cs_p = topk_cs.indices, topk_cs.values
            scores = topk_cs_p

            out_ids = topk_cs_index // top_k
            input_hidden = out_hidden[:, out_ids]

            input_ids = topk_index.view(-1)[topk_cs_index][None]

            ss_token.append(topk_index)
            scores_list.append(cu_scores)
            tree_mask = torch.cat((tree_mask[:, :, out_ids], self.tree_mask_init), dim=3)

        scores_list = torch.cat(scores_list, dim=0).view(-1)
        ss_token_list = torch.cat(ss_token, dim=0).view(-1)
        top_scores = torch.topk(scores_list, total_tokens, dim=-1)
        top_scores_index = top_scores.indices
        top_scores_index = torch.sort(top_scores_index).values

        draft_tokens = ss_token_list[top_scores_index]
        draft_tokens = torch.cat((sample_token, draft_tokens), dim=0)

        draft_parents = torch.cat(parents_list, dim=0)[top_scores_index // top_k].long()
        mask_index = torch.searchsorted(top_scores_index, draft_parents - 1, right=False)
        mask_index[draft_parents == 0] = -1
        mask_index = mask_index + 1
        mask_index_list = mask_index.tolist()
        tree_mask = torch.eye(total_tokens + 1).bool()
        tree_mask[:, 0] = True
        for i in range(total_tokens):
            tree_mask[i + 1].add_(tree_mask[mask_index_list[i]])

        tree_position_ids = torch.sum(tree_mask, dim=1) - 1

        tree_mask = tree_mask.float()[None, None]
        draft_tokens = draft_tokens[None]

        del parents_list, scores_list, ss_token, ss_token_list, draft_parents

        max_depth = torch.max(tree_position_ids) + 1
        noleaf_index = torch.unique(mask_index).tolist()
        noleaf_num = len(noleaf_index) - 1
        leaf_num = total_tokens - noleaf_num

        retrieve_indices = torch.zeros(leaf_num, max_depth.item(), dtype=torch.long) - 1
        retrieve_indices = retrieve_indices.tolist()

        rid = 0
        position_ids_list = tree_position_ids.tolist()

        for i in range(total_tokens + 1):
            if i not in noleaf_index:
                cid = i
                depth = position_ids_list[i]
                for j in reversed(range(depth + 1)):
                    retrieve_indices[rid][j] = cid
                    cid = mask_index_list[cid - 1]
                rid += 1

        if logits_processor is not None:
            maxitem = total_tokens + 5

            def custom_sort(lst):
                sort_keys = []
                for i in range(len(lst)):
                    sort_keys.append(lst[i] if lst[i] >= 0 else maxitem)
                return sort_keys

            retrieve_indices = sorted(retrieve_indices, key=custom_sort)

        retrieve_indices = torch.tensor(retrieve_indices, dtype=torch.long)
        del mask_index, mask_index_list, noleaf_index, noleaf_num, leaf_num, max_depth, rid
        tree_position_ids = tree_position_ids.to(hidden_states.device)

        return draft_tokens, retrieve_indices, tree_mask, tree_position_ids


class EdgeLayer(EaLayer):
    """GLUE (edge-drafted variant): the same tree drafting with the edge model in the head's place:
    fed what the head is fed (`input_ids[:, 1:]`), its own last hidden states and LM head stand
    in for the head's (the cloud's features passed in are not used)."""

    def __init__(self, edge, base_model, **kw):
        super().__init__(None, base_model, **kw)
        self.edge, self.lm_head = edge, edge.get_output_embeddings()

    def __call__(self, hidden_states, input_ids, past_key_values=None, position_ids=None, use_cache=True):
        cache = past_key_values if past_key_values is not None else DynamicCache()
        past, n = cache.get_seq_length(), input_ids.shape[1]
        if position_ids is None:
            position_ids = torch.arange(past, past + n, device=input_ids.device)
        mask = tree_attention(self.tree_mask, past, n, self.edge.dtype, input_ids.device)
        out = self.edge(input_ids=input_ids, past_key_values=cache, position_ids=position_ids.reshape(1, -1),
                        attention_mask=mask, use_cache=True, output_hidden_states=True)
        return out.hidden_states[-1], cache


class EaModel:
    """ea_model.EaModel's `forward` and `eagenerate` (GLUE: base model = the demo cloud)."""

    def __init__(self, base_model, ea_layer, stop_ids, variant):
        self.base_model, self.ea_layer = base_model, ea_layer
        self.stop_ids, self.variant = list(stop_ids), variant     # GLUE: eos_token_id
        self.use_eagle3 = False
        self.tree_mask = None             # GLUE: EAGLE sets base_model.model.tree_mask

    def forward(self, input_ids=None, attention_mask=None, past_key_values=None, output_orig=False,
                position_ids=None):
        past = past_key_values.get_seq_length()                      # GLUE: the 4D tree mask
        attention_mask = None if self.tree_mask is None else tree_attention(
            self.tree_mask, past, input_ids.shape[1], self.base_model.dtype, input_ids.device)
        with torch.no_grad():     # GLUE: inference_mode; DynamicCache tensors are copied in place
            if self.variant.toplevel_verifier:       # GLUE: the verifier's top-level forward
                out = self.base_model(input_ids=input_ids, attention_mask=attention_mask,
                                      past_key_values=past_key_values, position_ids=position_ids,
                                      output_hidden_states=True)
                outputs, orig = (out.hidden_states[-1],), out.logits
                return outputs, orig, outputs[0]
            # Pass input through the base model
            outputs = self.base_model.model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                past_key_values=past_key_values,
                position_ids=position_ids,
            )
            if output_orig:
                orig = self.base_model.lm_head(outputs[0])
            hidden_states = outputs[0]

        if output_orig:
            return outputs, orig, hidden_states
        else:
            return outputs, hidden_states

    __call__ = forward

    @torch.no_grad()
    def eagenerate(self, input_ids, temperature=0.0, top_p=0.0, top_k=0.0, max_new_tokens=512,
                   max_length=2048):
        if temperature > 1e-5:
            logits_processor = prepare_logits_processor(temperature=temperature, top_p=top_p, top_k=top_k)
        else:
            logits_processor = None

        padding = (torch.zeros(1, 1, dtype=torch.long) - 1).to(input_ids.device)
        input_ids = input_ids.clone()
        self.ea_layer.reset_kv()

        past_key_values = DynamicCache()    # GLUE: initialize_past_key_values

        input_len = input_ids.shape[1]
        self.tree_mask = None               # GLUE: reset_tree_mode
        draft_tokens, retrieve_indices, tree_mask, tree_position_ids, logits, hidden_state, sample_token = initialize_tree(
            input_ids, self, past_key_values, logits_processor
        )
        new_token = 0
        max_length = max_length - self.ea_layer.total_tokens - 10
        for idx in range(max_length):
            self.tree_mask = tree_mask

            draft_tokens = draft_tokens.to(input_ids.device)
            logits, hidden_state_new, outputs = tree_decoding(
                self,
                draft_tokens,
                past_key_values,
                tree_position_ids,
                input_ids,
                retrieve_indices,
            )
            draft_tokens = torch.cat((draft_tokens, padding), dim=1)
            candidates = draft_tokens[0, retrieve_indices]
            best_candidate, accept_length, sample_p = evaluate_posterior(
                logits, candidates, logits_processor
            )
            input_ids, draft_tokens, retrieve_indices, tree_mask, tree_position_ids, new_token, hidden_state, sample_token = update_inference_inputs(
                input_ids,
                candidates,
                best_candidate,
                accept_length,
                retrieve_indices,
                logits_processor,
                new_token,
                past_key_values,
                None,
                self,
                hidden_state_new,
                sample_p
            )

            if self.variant.eagle_stop:      # EAGLE's own stop: after the whole accepted path
                if any(s in input_ids[0, input_len:].tolist() for s in self.stop_ids):
                    break
                if new_token > max_new_tokens:
                    break
            else:                            # GLUE: stop at the first stop id, at max_new_tokens
                out = input_ids[0, input_len:].tolist()
                hit = [i for i, t in enumerate(out) if t in self.stop_ids]
                if hit or len(out) >= max_new_tokens:
                    end = hit[0] + 1 if hit else len(out)
                    return input_ids[:, :input_len + min(end, max_new_tokens)]
            if input_ids.shape[1] > max_length:
                break
        return input_ids


def initialize_tree(input_ids, model, past_key_values, logits_processor):
    outputs, orig, hidden_states = model(
        input_ids, past_key_values=past_key_values, output_orig=True
    )

    if logits_processor is not None:
        logits = orig[:, -1]
        logits = logits_processor(None, logits)
        probabilities = torch.nn.functional.softmax(logits, dim=1)
        token = torch.multinomial(probabilities, 1)
    else:
        token = torch.argmax(orig[:, -1])
        token = token[None, None]
    input_ids = torch.cat((input_ids, token.to(input_ids.device)), dim=1)

    draft_tokens, retrieve_indices, tree_mask, tree_position_ids = model.ea_layer.topK_genrate(
        hidden_states, input_ids, model.base_model.lm_head, logits_processor)
    return draft_tokens, retrieve_indices, tree_mask, tree_position_ids, orig, hidden_states, token


def tree_decoding(model, tree_candidates, past_key_values, tree_position_ids, input_ids, retrieve_indices):
    position_ids = tree_position_ids + input_ids.shape[1]
    if position_ids is not None and position_ids.dim() == 1:
        position_ids = position_ids.unsqueeze(0)
    outputs, tree_logits, hidden_state = model(
        tree_candidates,
        output_orig=True,
        past_key_values=past_key_values,
        position_ids=position_ids,
    )

    logits = tree_logits[0, retrieve_indices]
    return logits, hidden_state, outputs


def evaluate_posterior(logits, candidates, logits_processor):
    if logits_processor is None:
        posterior_mask = (
            candidates[:, 1:].to(logits.device) == torch.argmax(logits[:, :-1], dim=-1)
        ).int()
        candidates_accept_length = (torch.cumprod(posterior_mask, dim=1)).sum(dim=1)
        accept_length = candidates_accept_length.max()
        if accept_length == 0:
            best_candidate = torch.tensor(0, dtype=torch.long, device=candidates.device)
        else:
            best_candidate = torch.argmax(candidates_accept_length).to(torch.long)
        return best_candidate, accept_length, logits[best_candidate, accept_length]

    else:
        accept_length = 1
        accept_cand = candidates[0][:1]
        best_candidate = 0
        for i in range(1, candidates.shape[1]):
            if i != accept_length:
                break
            adjustflag = False
            is_eq = (candidates[:, :accept_length] == accept_cand).all(dim=1)
            fi = torch.nonzero(is_eq, as_tuple=True)[0][0]
            gt_logits = logits[fi, i - 1][None]
            gt_logits = logits_processor(None, gt_logits)[0]
            gtp = torch.softmax(gt_logits, dim=0)
            candidates_set = []
            for j in range(candidates.shape[0]):
                if is_eq[j]:
                    x = candidates[j, i]
                    xi = x.item()
                    if xi in candidates_set or xi == -1:
                        continue
                    candidates_set.append(xi)
                    r = random.random()
                    px = gtp[xi]
                    qx = 1.0
                    acp = px / qx
                    if r <= acp:
                        accept_cand = torch.cat((accept_cand, x[None]), dim=0)
                        accept_length += 1
                        best_candidate = j
                        break
                    else:
                        gtp[xi] = 0
                        gtp = gtp / gtp.sum()
                        adjustflag = True
        if adjustflag and accept_length != candidates.shape[1]:
            sample_p = gtp
        else:
            gt_logits = logits[best_candidate, accept_length - 1][None]
            gt_logits = logits_processor(None, gt_logits)[0]
            sample_p = torch.softmax(gt_logits, dim=0)
        return torch.tensor(best_candidate), accept_length - 1, sample_p


@torch.no_grad()
def update_inference_inputs(input_ids, candidates, best_candidate, accept_length, retrieve_indices,
                            logits_processor, new_token, past_key_values_data_list, current_length_data,
                            model, hidden_state_new, sample_p):
    cache = past_key_values_data_list                     # GLUE: a DynamicCache
    prev_input_len = input_ids.shape[1]
    select_indices = (
        retrieve_indices[best_candidate, : accept_length + 1] + prev_input_len
    )
    input_ids = torch.cat(
        [input_ids, candidates[None, best_candidate, : accept_length + 1].to(input_ids.device)], dim=-1
    )
    for past_key_values_data in kv_data(cache):
        tgt = past_key_values_data[..., select_indices.to(past_key_values_data.device), :]
        dst = past_key_values_data[..., prev_input_len: prev_input_len + tgt.shape[-2], :]
        if model.variant.copy_down:                       # twin no_copy_down.py: skipped
            dst.copy_(tgt, non_blocking=True)

    set_length(cache, prev_input_len + tgt.shape[-2])     # GLUE: current_length_data.fill_

    retrieve_hidden_state_new = hidden_state_new[:, retrieve_indices]
    accept_hidden_state_new = retrieve_hidden_state_new[:, best_candidate, : accept_length + 1]
    if model.variant.slot_features:                       # twin slot_features.py (vllm #14649)
        accept_hidden_state_new = hidden_state_new[:, : accept_length + 1]
    prob = sample_p
    if logits_processor is not None:
        token = torch.multinomial(prob, 1)
        token = token[None]
    else:
        token = torch.argmax(prob)
        token = token[None, None]
    draft_tokens, retrieve_indices, tree_mask, tree_position_ids = model.ea_layer.topK_genrate(
        accept_hidden_state_new,
        input_ids=torch.cat((input_ids, token.to(input_ids.device)), dim=1),
        head=model.base_model.lm_head, logits_processor=logits_processor)

    new_token += accept_length + 1

    return input_ids, draft_tokens, retrieve_indices, tree_mask, tree_position_ids, new_token, None, token


def run(cloud, head, input_ids, k, max_new_tokens, stop_ids, variant, temperature=0.0, edge=None):
    """GLUE: build EaModel around the demo cloud and head (or edge); tree depth k - 1 (paths of
    at most k drafts), 3k nodes, top-4 per expansion."""
    tree = dict(total_tokens=3 * k, depth=max(1, k - 1), top_k=4)
    ea_layer = EdgeLayer(edge, cloud, **tree) if variant.edge_drafted else EaLayer(head, cloud, **tree)
    model = EaModel(cloud, ea_layer, stop_ids, variant)
    n = input_ids.shape[1]
    out = model.eagenerate(input_ids.to(cloud.device), temperature=temperature,
                           max_new_tokens=max_new_tokens)
    return out[0, n:].tolist()
