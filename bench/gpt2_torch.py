"""gpt2_torch.py - GPT-2 in plain PyTorch from a Hugging Face-named state
dict ({"wte.weight": array, "h.0.attn.c_attn.weight": (in, out) array, ...},
numpy or torch), the peer that python/tests/test_gpt2.py and
bench/gpt2_generate.py hold examples/gpt2.py against:

    m = TorchGPT2(state_dict, n_head)
    m.forward(idx)                     logits (B, T, V) of ids (B, T), causal
    m.generate(prompt, n, times=None)  greedy: n new ids, one position a step
                                       against a KV cache (torch.cat of each
                                       step's k and v); times gets each new
                                       token's seconds
    m.parameters()                     the tensors (requires_grad for training)

The math is GPT-2's (and llm.c's): pre-LayerNorm blocks (eps 1e-5), causal
attention, gelu tanh, the head tied to wte. torch 1.13 (Debian 12) has no
F.scaled_dot_product_attention, so attention is written out."""
import math
import time

import numpy as np
import torch
import torch.nn.functional as F

BLOCK = ("ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
         "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
         "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias")


class TorchGPT2:
    def __init__(self, state_dict, n_head, requires_grad=False):
        def t(v):
            a = v.detach().clone() if isinstance(v, torch.Tensor) else torch.tensor(np.asarray(v))
            return a.float().requires_grad_(requires_grad)

        self.sd = {k: t(v) for k, v in state_dict.items()}
        self.n_head = n_head
        self.n_layer = sum(1 for k in self.sd if k.endswith(".ln_1.weight"))
        self.C = self.sd["wte.weight"].shape[1]

    def parameters(self):
        return list(self.sd.values())

    def _w(self, l, name):
        return self.sd["h.%d.%s" % (l, name)]

    def _ln(self, x, w, b):
        return F.layer_norm(x, (self.C,), w, b, 1e-5)

    def _heads(self, l, x):
        """q, k, v (B, H, T, hd) of the block input x (B, T, C)"""
        B, T, C = x.shape
        h = self._ln(x, self._w(l, "ln_1.weight"), self._w(l, "ln_1.bias"))
        qkv = h @ self._w(l, "attn.c_attn.weight") + self._w(l, "attn.c_attn.bias")
        return [a.reshape(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                for a in qkv.split(C, dim=2)]

    def _finish(self, l, x, y):
        """x + c_proj(y) then the MLP, y (B, H, T, hd)"""
        B, H, T, hd = y.shape
        y = y.transpose(1, 2).reshape(B, T, H * hd)
        x = x + y @ self._w(l, "attn.c_proj.weight") + self._w(l, "attn.c_proj.bias")
        h = self._ln(x, self._w(l, "ln_2.weight"), self._w(l, "ln_2.bias"))
        h = F.gelu(h @ self._w(l, "mlp.c_fc.weight") + self._w(l, "mlp.c_fc.bias"),
                   approximate="tanh")
        return x + h @ self._w(l, "mlp.c_proj.weight") + self._w(l, "mlp.c_proj.bias")

    def _head(self, x):
        x = self._ln(x, self.sd["ln_f.weight"], self.sd["ln_f.bias"])
        return x @ self.sd["wte.weight"].t()

    def forward(self, idx):
        idx = torch.as_tensor(np.asarray(idx), dtype=torch.long)
        T = idx.shape[1]
        x = self.sd["wte.weight"][idx] + self.sd["wpe.weight"][:T]
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        for l in range(self.n_layer):
            q, k, v = self._heads(l, x)
            att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            att = att.masked_fill(~mask, float("-inf")).softmax(-1)
            x = self._finish(l, x, att @ v)
        return self._head(x)

    @torch.no_grad()
    def generate(self, prompt, n_new, times=None):
        """greedy ids after prompt, a KV cache grown by torch.cat each step"""
        cache = [None] * self.n_layer
        seq, out = list(prompt), []
        for p in range(len(prompt) + n_new - 1):
            t0 = time.perf_counter()
            x = (self.sd["wte.weight"][seq[p]] + self.sd["wpe.weight"][p]).reshape(1, 1, -1)
            for l in range(self.n_layer):
                q, k, v = self._heads(l, x)
                if cache[l] is not None:
                    k, v = torch.cat([cache[l][0], k], 2), torch.cat([cache[l][1], v], 2)
                cache[l] = (k, v)
                att = ((q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])).softmax(-1)
                x = self._finish(l, x, att @ v)
            if p < len(prompt) - 1:
                continue
            nxt = int(self._head(x)[0, 0].argmax())
            seq.append(nxt)
            out.append(nxt)
            if times is not None:
                times.append(time.perf_counter() - t0)
        return out
