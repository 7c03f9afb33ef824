"""test_transformer.py - the transformer's ops against PyTorch, forward and
backward: cross-entropy (reduction, ignore_index, label_smoothing, class
dims, probabilities), gelu (both forms) and erf, tril/triu, masked_fill,
scaled_dot_product_attention (masks, causal, broadcast batch dims, dropout);
kernel counts of the loss and of attention forward and backward; errors."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tinyc
from tinyc import Tensor, TinycError
from helpers import assert_close, requires

pytestmark = requires("tc_cross_entropy_ex", "tc_gelu", "tc_tril", "tc_masked_fill",
                      "tc_scaled_dot_product_attention_ex", "tc_backward")


def both(fn, tfn, arrays, rtol=1e-5, atol=1e-5, grad=True, what=""):
    """fn on tinyc Tensors and tfn on torch tensors of the same float arrays:
    the outputs, then the gradients of sum(out * w) for fixed weights w"""
    xs = [Tensor(a, requires_grad=grad) for a in arrays]
    ts = [torch.tensor(a, requires_grad=grad) for a in arrays]
    out, tout = fn(*xs), tfn(*ts)
    assert_close(out, tout, rtol, atol, what + " forward")
    if not grad:
        return
    w = np.random.default_rng(1).uniform(-1, 1, tout.shape).astype(np.float32)
    (out * Tensor(w)).sum().backward()
    (tout * torch.tensor(w)).sum().backward()
    for i, (x, t) in enumerate(zip(xs, ts)):
        assert_close(x.grad, t.grad, rtol, atol, "%s d/d input %d" % (what, i))


def torch_sdpa(q, k, v, attn_mask=None, is_causal=False):
    """torch's scaled_dot_product_attention, written out (this torch predates
    F.scaled_dot_product_attention): softmax(q k^T / sqrt(E) + mask) v"""
    L, S = q.shape[-2], k.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        attn_mask = torch.ones(L, S, dtype=torch.bool).tril()
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    elif attn_mask is not None:
        scores = scores + attn_mask
    return scores.softmax(-1) @ v


def rnd(shape, seed=0, lo=-2.0, hi=2.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


# ---- cross-entropy ----------------------------------------------------------

LABELS = np.array([1, -100, 4, 0, 2, -100, 3, 3], dtype=np.int64)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("ignore_index", [-100, 3])
@pytest.mark.parametrize("ldt", [np.int32, np.int64])
def test_cross_entropy(reduction, smoothing, ignore_index, ldt):
    labels = np.where(LABELS == -100, ignore_index, LABELS)  # ignore_index 3: rows 1, 5, 6, 7
    y = labels.astype(ldt)
    both(lambda x: x.cross_entropy(Tensor(y), reduction=reduction, label_smoothing=smoothing,
                                   ignore_index=ignore_index),
         lambda x: F.cross_entropy(x, torch.tensor(labels), reduction=reduction,
                                   label_smoothing=smoothing, ignore_index=ignore_index),
         [rnd((8, 5))], what="cross_entropy %s %g %d" % (reduction, smoothing, ignore_index))


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropy_class_dim(reduction):
    """torch's (N, C, d) logits with (N, d) labels; a 1-d input (C,)"""
    y = np.array([[0, 2, -100], [1, 1, 3]], dtype=np.int64)
    both(lambda x: x.cross_entropy(Tensor(y), reduction=reduction, label_smoothing=0.1),
         lambda x: F.cross_entropy(x, torch.tensor(y), reduction=reduction, label_smoothing=0.1),
         [rnd((2, 4, 3), 1)], what="(N, C, d)")
    both(lambda x: x.cross_entropy(Tensor(np.int64(2)), reduction=reduction),
         lambda x: F.cross_entropy(x, torch.tensor(2), reduction=reduction), [rnd((4,), 2)],
         what="(C,)")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_probabilities(reduction):
    p = np.random.default_rng(3).dirichlet(np.ones(5), 6).astype(np.float32)
    both(lambda x: x.cross_entropy(Tensor(p), reduction=reduction, label_smoothing=0.1),
         lambda x: F.cross_entropy(x, torch.tensor(p), reduction=reduction, label_smoothing=0.1),
         [rnd((6, 5), 4)], what="probabilities")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_sparse_categorical_crossentropy(reduction):
    """tinygrad's: classes last, any leading shape, ignore_index -1 by default"""
    y = np.array([[0, 3, -1], [2, -1, 1]], dtype=np.int32)
    tl = torch.tensor(y.astype(np.int64))
    both(lambda x: x.sparse_categorical_crossentropy(Tensor(y), label_smoothing=0.1,
                                                     reduction=reduction),
         lambda x: F.cross_entropy(x.reshape(-1, 4), tl.reshape(-1), ignore_index=-1,
                                   label_smoothing=0.1, reduction=reduction).reshape(
             tl.shape if reduction == "none" else ()),
         [rnd((2, 3, 4), 5)], what="sparse_categorical_crossentropy")


def test_cross_entropy_edges():
    x = Tensor(rnd((3, 4)))
    assert math.isnan(x.cross_entropy(Tensor([-100, -100, -100])).item())  # nothing left: NaN
    assert x.cross_entropy(Tensor([-100, -100, -100]), reduction="sum").item() == 0
    with pytest.raises(TinycError, match=r"labels\[1\] = 7 is out of range for 4 classes"):
        x.cross_entropy(Tensor([0, 7, 1]))
    with pytest.raises(ValueError, match="reduction must be 'mean', 'sum' or 'none'"):
        x.cross_entropy(Tensor([0, 1, 1]), reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing must be in"):
        x.cross_entropy(Tensor([0, 1, 1]), label_smoothing=1.5)
    with pytest.raises(ValueError, match="labels must have the logits' shape"):
        x.cross_entropy(Tensor([0, 1]))
    with pytest.raises(TypeError, match="integer class ids"):
        x.sparse_categorical_crossentropy(Tensor([0.0, 1.0, 1.0]))


def test_cross_entropy_kernels():
    """the mean: 2 kernels (the rows' losses with log_softmax, then their mean
    and the count of labels kept); none: 1; the gradient: 2 and 1"""
    x = Tensor(rnd((16, 50), 6), requires_grad=True)
    y = Tensor(np.arange(16, dtype=np.int32) % 50)
    loss = x.cross_entropy(y, label_smoothing=0.1)
    assert len(loss.schedule()) == 2
    rows = x.cross_entropy(y, reduction="none")
    assert len(rows.schedule()) == 1
    loss.backward()
    assert len(x.grad.schedule()) == 2
    x.grad = None
    rows.sum().backward()
    assert len(x.grad.schedule()) == 1


# ---- gelu, erf, masks -------------------------------------------------------------


@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_gelu(approximate):
    both(lambda x: x.gelu(approximate), lambda x: F.gelu(x, approximate=approximate),
         [rnd((7, 9), 7, -5, 5)], what="gelu " + approximate)
    x = Tensor(rnd((7, 9), 8), requires_grad=True)
    y = x.gelu(approximate)
    assert len(y.schedule()) == 1
    y.sum().backward()
    assert len(x.grad.schedule()) == 1


def test_gelu_default_is_tinygrads_tanh():
    x = rnd((20,), 9, -4, 4)
    assert_close(Tensor(x).gelu(), F.gelu(torch.tensor(x), approximate="tanh"))
    with pytest.raises(ValueError, match="approximate must be 'tanh' or 'none'"):
        Tensor(x).gelu("erf")


def test_erf():
    both(lambda x: x.erf(), torch.erf, [rnd((5, 40), 10, -4, 4)], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("diagonal", [-3, -1, 0, 2, 7])
@pytest.mark.parametrize("name", ["tril", "triu"])
def test_triangles(name, diagonal):
    both(lambda x: getattr(x, name)(diagonal), lambda x: getattr(torch, name)(x, diagonal),
         [rnd((2, 4, 6), 11)], what=name)
    i = np.arange(20, dtype=np.int32).reshape(4, 5)
    np.testing.assert_array_equal(getattr(Tensor(i), name)(diagonal).numpy(),
                                  getattr(np, name)(i, diagonal))


def test_triangle_errors():
    with pytest.raises(TinycError, match=r"tc_tril: x \(5,\) needs at least 2 dims"):
        Tensor(rnd((5,))).tril()
    with pytest.raises(TypeError, match="diagonal must be an int"):
        Tensor(rnd((3, 3))).triu(1.5)


def test_masked_fill():
    m = np.array([[True], [False], [True], [False]])
    both(lambda x: x.masked_fill(Tensor(m), -1e9),
         lambda x: x.masked_fill(torch.tensor(m), -1e9), [rnd((3, 4, 5), 12)])
    x = Tensor(rnd((4, 5), 13))
    assert (x.masked_fill(m, float("-inf")).numpy()[0] == -np.inf).all()
    with pytest.raises(TinycError, match="tc_masked_fill: mask must be bool, got float32"):
        x.masked_fill(Tensor(rnd((4, 5))), 0)
    with pytest.raises(TinycError, match=r"mask \(3,\) does not broadcast to \(4,5\)"):
        x.masked_fill(np.array([True, False, True]), 0)


# ---- attention ------------------------------------------------------------------

SDPA = [  # q, k, v shapes, mask kind
    ((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 3), None),
    ((2, 3, 5, 4), (2, 3, 5, 4), (2, 3, 5, 4), "causal"),
    ((2, 3, 5, 4), (3, 6, 4), (3, 6, 2), "bool"),
    ((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 3), "float"),
    ((4, 8), (6, 8), (6, 8), "causal"),
]


@pytest.mark.parametrize("q,k,v,mask", SDPA, ids=lambda v: str(v))
def test_sdpa(q, k, v, mask):
    rng = np.random.default_rng(14)
    L, S = q[-2], k[-2]
    m, causal = None, mask == "causal"
    if mask == "bool":
        m = rng.uniform(size=(L, S)) > 0.3
        m[:, 0] = True  # no row fully masked
    elif mask == "float":
        m = rng.uniform(-2, 2, (2, 1, L, S)).astype(np.float32)
    both(lambda a, b, c: a.scaled_dot_product_attention(
             b, c, attn_mask=None if m is None else Tensor(m), is_causal=causal),
         lambda a, b, c: torch_sdpa(
             a, b, c, attn_mask=None if m is None else torch.tensor(m), is_causal=causal),
         [rnd(q, 15), rnd(k, 16), rnd(v, 17)], rtol=1e-4, atol=1e-5, what="sdpa")


@pytest.mark.parametrize("norows", [0, 1])
def test_sdpa_kernels(norows):
    """at GPT-2 124M's head shape (B 4, 12 heads, T 64, 64 per head): 1 row
    kernel forward (scores, softmax and the product with v per (batch, head,
    query)), 4 for the gradients of q, k and v together; with TC_NOROWS=1
    what composing the ops gives: 3 and 9; the same numbers either way"""
    q, k, v = (Tensor(rnd((4, 12, 64, 64), s), requires_grad=True) for s in (18, 19, 20))
    was = tinyc.get_flag("TC_NOROWS")  # restored: a run with TC_NOROWS=1 keeps it
    tinyc.set_flag("TC_NOROWS", norows)
    try:
        o = q.scaled_dot_product_attention(k, v, is_causal=True)
        assert len(o.schedule()) == (3 if norows else 1)
        o.sum().backward()
        assert len(q.grad.schedule(k.grad, v.grad)) == (9 if norows else 4)
        tq, tk, tv = (torch.tensor(t.numpy(), requires_grad=True) for t in (q, k, v))
        sc = tq @ tk.transpose(-1, -2) / 8
        sc = sc.masked_fill(torch.ones(64, 64, dtype=torch.bool).triu(1), float("-inf"))
        to = torch.softmax(sc, -1) @ tv
        to.sum().backward()
        assert_close(o, to.detach().numpy(), atol=1e-5)
        for g, tg in ((q.grad, tq.grad), (k.grad, tk.grad), (v.grad, tv.grad)):
            assert_close(g, tg.numpy(), atol=1e-4)
    finally:
        tinyc.set_flag("TC_NOROWS", was)


def test_sdpa_dropout():
    """dropout_p acts while Tensor.training only: with v = I each output is a
    weight, 0 or scaled by 1/(1-p)"""
    q, k, v = Tensor(rnd((5, 4), 21)), Tensor(rnd((6, 4), 22)), Tensor(np.eye(6, dtype=np.float32))
    plain = q.scaled_dot_product_attention(k, v).numpy()
    np.testing.assert_array_equal(q.scaled_dot_product_attention(k, v, dropout_p=0.5).numpy(),
                                  plain)
    with Tensor.train():
        Tensor.manual_seed(5)
        d = q.scaled_dot_product_attention(k, v, dropout_p=0.5).numpy()
    kept = d != 0
    assert kept.any() and (~kept).any()
    np.testing.assert_allclose(d[kept], 2 * plain[kept], rtol=1e-5)


def test_sdpa_errors():
    q = Tensor(rnd((2, 5, 4)))
    with pytest.raises(TinycError, match="give attn_mask or is_causal, not both"):
        q.scaled_dot_product_attention(q, q, attn_mask=Tensor(np.ones((5, 5), bool)),
                                       is_causal=True)
    with pytest.raises(TinycError, match=r"q \(2,5,4\), k \(2,5,3\)"):
        q.scaled_dot_product_attention(Tensor(rnd((2, 5, 3))), q)
    with pytest.raises(TinycError, match=r"attn_mask \(4,5\) does not broadcast to the scores"):
        q.scaled_dot_product_attention(q, q, attn_mask=Tensor(np.ones((4, 5), bool)))
    with pytest.raises(TypeError, match="key must be a Tensor"):
        q.scaled_dot_product_attention(rnd((2, 5, 4)), q)
    with pytest.raises(ValueError, match="dropout_p must be in"):
        q.scaled_dot_product_attention(q, q, dropout_p=2)
