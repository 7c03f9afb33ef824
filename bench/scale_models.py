"""scale_models.py - the models of bench/scale.py's table, one training step
each, written once against a tinygrad-shaped API so that the same code runs
on libtinyc (python/tinyc) and, for the MLP, on tinygrad itself.

Every model is built as `make(T, nn, ...)` where T is the library's Tensor
class and nn its nn module (tinyc's or tinygrad's), and returns a Model:

    m.params           trainable tensors (and BatchNorm's running statistics)
    m.opt              Adam over them (lr 1e-3: the step's kernels, not the curve)
    m.realize_state()  parameters and Adam's state realized, before timing
    m.inputs()         a fixed batch as tensors (numpy data, seeded)
    m.step(*inputs)    one training step: zero_grad, forward, loss, backward,
                       Adam; the update and the loss realized together;
                       returns the loss
    m.lazy_step(*in)   the same step built, not run: [loss, *update] (the
                       gradients left lazy: tinygrad's schedule_step)

The models (shapes are comments on the code; B batch, T tokens):
  mlp(L)      L x (Linear(64, 64), gelu) on x (32, 64), loss mean(h^2).
              The issue's scaling model; the kernel-count test
              tests/nn/test_deep_mlp.c builds the same step in C.
  resnet18()  CIFAR ResNet-18: conv3x3(3->64) + BN + relu, four stages of two
              BasicBlocks (64, 128, 256, 512 channels, stride 2 from the second
              stage, 1x1 conv + BN shortcuts), avg_pool 4, Linear(512, 10);
              x (16, 3, 32, 32), cross-entropy.
  gpt2()      GPT-2 124M: 12 layers, C 768, 12 heads, T 64, B 4, vocab 50304,
              pre-LN blocks (causal attention, 4C gelu MLP), learned positions,
              the output head tied to the token embedding, cross-entropy.
              The token embedding is wte[idx]: a gather, and a scatter-add
              of its gradient into wte's (tc_index).
"""
import math

import numpy as np


class Model:
    """parameters, optimizer, a fixed batch and the training step of one model"""

    def __init__(self, T, nn, modules, loss_fn, batch):
        self.T, self.nn = T, nn
        self.is_tinyc = T.__module__.startswith("tinyc")
        # trainable tensors and BatchNorm's statistics (requires_grad False: the
        # optimizer realizes them with each step, in both libraries)
        self.modules = modules  # nn.state.get_state_dict(m.modules): the weights by name
        self.params = nn.state.get_parameters(modules)
        self.opt = nn.optim.Adam(self.params, lr=1e-3)
        self._loss_fn, self._batch = loss_fn, batch

    def realize_state(self):
        """parameters and optimizer state realized (tinygrad's start lazy), so a
        step times only the step"""
        state = list(self.params)
        for name in ("m", "v", "b1_t", "b2_t", "lr"):
            v = getattr(self.opt, name, None)
            state += v if isinstance(v, list) else [v] if isinstance(v, self.T) else []
        self.T.realize(*state)

    def inputs(self):
        return [self.T(a) for a in self._batch]

    def step(self, *inputs):
        self.T.training = True
        self.opt.zero_grad()
        loss = self._loss_fn(*inputs)
        loss.backward()
        if self.is_tinyc:
            self.opt.step()  # realizes the loss with the update (and BN's statistics)
        else:
            self.T.realize(loss, *self.opt.schedule_step())
        return loss

    def lazy_step(self, *inputs):
        """a step built and not run (opt.schedule_step: the gradients stay
        lazy); returns what it would realize, the loss first (tinygrad's
        loss.schedule(*rest); bench/step_memory.py realizes it)"""
        self.T.training = True
        self.opt.zero_grad()
        loss = self._loss_fn(*inputs)
        loss.backward()
        return [loss] + self.opt.schedule_step()


# ---- the MLP ------------------------------------------------------------------

def mlp(T, nn, n_layers, width=64, batch=32):
    """n_layers x (Linear(width, width), gelu); x (batch, width)"""
    layers = [nn.Linear(width, width) for _ in range(n_layers)]

    def loss(x):  # x (B, 64)
        h = x
        for layer in layers:
            h = layer(h).gelu()  # (B, 64)
        return h.square().mean()

    x = np.random.default_rng(0).random((batch, width), dtype=np.float32)
    return Model(T, nn, layers, loss, [x])


# ---- ResNet-18 (CIFAR) --------------------------------------------------------

class BasicBlock:
    """relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)); conv1 has the stride"""

    def __init__(self, nn, c_in, c_out, stride):
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.short = []
        if stride != 1 or c_in != c_out:  # 1x1 conv + BN to the new shape
            self.short = [nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False),
                          nn.BatchNorm2d(c_out)]

    def __call__(self, x):  # x (B, c_in, H, W) -> (B, c_out, H/stride, W/stride)
        out = self.bn1(self.conv1(x)).relu()
        out = self.bn2(self.conv2(out))
        s = x
        for f in self.short:
            s = f(s)
        return (out + s).relu()


def resnet18(T, nn, batch=16, classes=10):
    stem = [nn.Conv2d(3, 64, 3, stride=1, padding=1, bias=False), nn.BatchNorm2d(64)]
    blocks, c_in = [], 64
    for c_out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        blocks += [BasicBlock(nn, c_in, c_out, stride), BasicBlock(nn, c_out, c_out, 1)]
        c_in = c_out
    fc = nn.Linear(512, classes)

    def loss(x, y):  # x (B, 3, 32, 32), y (B,) class ids
        h = stem[1](stem[0](x)).relu()  # (B, 64, 32, 32)
        for b in blocks:
            h = b(h)  # ... (B, 512, 4, 4)
        h = h.avg_pool2d(kernel_size=(4, 4)).reshape(h.shape[0], 512)  # (B, 512)
        return fc(h).sparse_categorical_crossentropy(y)

    return Model(T, nn, [stem, blocks, fc], loss, list(resnet18_batch(batch, classes)))


def resnet18_batch(batch=16, classes=10):
    """resnet18's fixed batch: x (B, 3, 32, 32) float32, y (B,) int32 class ids"""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 3, 32, 32), dtype=np.float32)
    y = rng.integers(0, classes, batch).astype(np.int32)
    return x, y


# ---- GPT-2 124M ---------------------------------------------------------------

class CausalSelfAttention:
    def __init__(self, nn, C, n_head):
        self.c_attn, self.c_proj, self.n_head = nn.Linear(C, 3 * C), nn.Linear(C, C), n_head

    def __call__(self, x, mask):  # x (B, T, C); mask (T, T): 0 up to the diagonal, -inf after
        B, T, C = x.shape
        hd = C // self.n_head
        qkv = self.c_attn(x)  # (B, T, 3C)
        q, k, v = [qkv[:, :, i * C:(i + 1) * C].reshape(B, T, self.n_head, hd).transpose(1, 2)
                   for i in range(3)]  # each (B, nh, T, hd)
        att = (q @ k.transpose(2, 3)) * (1.0 / math.sqrt(hd)) + mask  # (B, nh, T, T)
        y = att.softmax(-1) @ v  # (B, nh, T, hd)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))


class Block:
    def __init__(self, nn, C, n_head):
        self.ln_1, self.attn = nn.LayerNorm(C), CausalSelfAttention(nn, C, n_head)
        self.ln_2, self.c_fc = nn.LayerNorm(C), nn.Linear(C, 4 * C)
        self.c_proj = nn.Linear(4 * C, C)

    def __call__(self, x, mask):  # x (B, T, C)
        x = x + self.attn(self.ln_1(x), mask)
        return x + self.c_proj(self.c_fc(self.ln_2(x)).gelu())  # the MLP: (B, T, 4C) inside


def gpt2(T, nn, n_layer=12, C=768, n_head=12, tokens=64, batch=4, vocab=50304, block=1024):
    rng = np.random.default_rng(0)
    wte = T(rng.standard_normal((vocab, C), dtype=np.float32) * 0.02)  # (V, C), tied head
    wpe = T(rng.standard_normal((block, C), dtype=np.float32) * 0.02)  # (1024, C)
    blocks = [Block(nn, C, n_head) for _ in range(n_layer)]
    ln_f = nn.LayerNorm(C)
    mask = T(np.triu(np.full((tokens, tokens), -np.inf, np.float32), 1))  # (T, T)

    def loss(idx, targets):  # idx, targets (B, T) token ids
        B, Tn = idx.shape
        tok = wte[idx]  # (B, T, C): a gather (tc_index), its gradient one scatter-add
        x = tok + wpe[:Tn]  # (B, T, C)
        for b in blocks:
            x = b(x, mask)
        logits = ln_f(x) @ wte.transpose(0, 1)  # (B, T, V)
        return logits.reshape(B * Tn, vocab).sparse_categorical_crossentropy(
            targets.reshape(B * Tn))

    idx = rng.integers(0, vocab, (batch, tokens)).astype(np.int32)
    targets = rng.integers(0, vocab, (batch, tokens)).astype(np.int32)
    return Model(T, nn, [wte, wpe, blocks, ln_f], loss, [idx, targets])
