"""test_schedule.py - schedule() kernel counts for the fusion cases (each
count explained) and GlobalCounters."""
import numpy as np
import pytest

import tinyc
from helpers import assert_close, requires
from tinyc import GlobalCounters, Tensor


def realized(*shape, seed=0):
    """a realized float32 input, so only the ops under test are scheduled"""
    return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def test_elementwise_chain_is_one_kernel():
    a, b, c = realized(16, 16), realized(16, 16, seed=1), realized(16, 16, seed=2)
    out = a * b + c  # mul and add fuse into one elementwise kernel
    assert len(out.schedule()) == 1
    assert_close(out, a.numpy() * b.numpy() + c.numpy())


def test_reduce_of_elementwise_is_one_kernel():
    a, b = realized(32, 8), realized(32, 8, seed=1)
    out = (a * b).sum()  # the multiply fuses into the reduce's loop
    assert len(out.schedule()) == 1
    assert_close(out, (a.numpy() * b.numpy()).sum(), rtol=1e-4, atol=1e-4)


def test_softmax_from_primitives_is_one_kernel():
    x = realized(8, 10)
    m = x.max(axis=1, keepdim=True)  # max, exp, sum and divide over the same rows
    e = (x - m).exp()
    out = e / e.sum(axis=1, keepdim=True)
    assert len(out.schedule()) == 1
    xn = x.numpy()
    want = np.exp(xn - xn.max(1, keepdims=True))
    assert_close(out, want / want.sum(1, keepdims=True))


@requires("tc_softmax")
def test_softmax_over_rows_is_one_kernel():
    x = realized(8, 10)
    assert len(x.softmax(axis=1).schedule()) == 1
    assert len(x.log_softmax(axis=-1).schedule()) == 1


def test_realized_and_views_schedule_nothing():
    x = realized(4, 6)
    assert len(x.schedule()) == 0  # already a buffer
    assert len(x.reshape(6, 4).permute(1, 0)[1:, ::2].schedule()) == 0
    assert len(x.T.contiguous().schedule()) == 1  # a copy kernel
    y = (x + 1).realize()
    assert len(y.schedule()) == 0


def test_two_outputs_in_one_schedule():
    x = realized(4, 6)
    s, m = x.mean(axis=1), x.std(axis=1)
    assert len(s.schedule(m)) == 1  # mean and std of the same rows share one kernel
    s.realize(m)
    assert len(s.schedule(m)) == 0
    assert_close(s, x.numpy().mean(1))
    assert_close(m, x.numpy().std(1, ddof=1))


def test_schedule_is_a_list():
    sched = (realized(3) + 1).schedule()
    assert isinstance(sched, list) and len(sched) == 1 and "kernel 0" in repr(sched[0])


def test_global_counters():
    GlobalCounters.reset()
    assert GlobalCounters.kernel_count == 0
    a, b = realized(64), realized(64, seed=1)
    (a * b + 1).realize()
    assert GlobalCounters.kernel_count == 1
    assert GlobalCounters.global_ops > 0 and GlobalCounters.global_mem >= 3 * 64 * 4
    assert GlobalCounters.time_sum_s >= 0.0
    (a - b).sum().realize()
    assert GlobalCounters.kernel_count == 2
    assert GlobalCounters.schedule_s > 0.0 and GlobalCounters.lower_s >= 0.0
    assert 0.0 <= GlobalCounters.codegen_s + GlobalCounters.render_s <= GlobalCounters.lower_s
    assert GlobalCounters.launch_s > 0.0 and GlobalCounters.compile_s >= 0.0
    assert isinstance(GlobalCounters.compile_count, int) and GlobalCounters.compile_count >= 0
    assert GlobalCounters.mem_peak >= GlobalCounters.mem_used >= 0 and GlobalCounters.mem_peak > 0
    assert GlobalCounters.mem_cached >= 0
    GlobalCounters.reset()
    assert GlobalCounters.kernel_count == 0 and GlobalCounters.global_ops == 0
    (a * b).realize()  # a, b and the product
    assert GlobalCounters.graph_nodes == 3


def test_flags():
    old = tinyc.get_flag("TC_NOFUSE")
    try:
        tinyc.set_flag("TC_NOFUSE", 1)
        a, b, c = realized(8), realized(8, seed=1), realized(8, seed=2)
        assert len((a * b + c).sum().schedule()) >= 1
    finally:
        tinyc.set_flag("TC_NOFUSE", old)
    with pytest.raises(tinyc.TinycError):
        tinyc.set_flag("TC_NO_SUCH_FLAG", 1)
    with pytest.raises(tinyc.TinycError):
        tinyc.get_flag("TC_NO_SUCH_FLAG")
