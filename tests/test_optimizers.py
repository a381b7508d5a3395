"""Training ops (Apply*) and TF1 optimizers against TF 1.15: every kernel against a numpy
version of TF's formula over several steps, optimizers against numpy re-implementations
(exactly, in float64) and against values recorded from TensorFlow, slots (names,
colocation, lookup), the global step, learning rates as tensors/callables, locking, and
the errors TF raises."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors
from flowrt.plugins.kernels.standard import training_ops as tops


def f32(x):
    """A Python float as TF's float32 constant, widened to float64 (what a float32
    hyper-parameter cast to a float64 variable's dtype gives)."""
    return np.float64(np.float32(x))


# ---------------------------------------------------------------------------------------
# numpy versions of TF's CPU functors (same order of operations)
# ---------------------------------------------------------------------------------------
def np_gd(s, g, lr):
    s["var"] = s["var"] - g * lr


def np_momentum(s, g, lr, momentum, nesterov=False):
    s["accum"] = s["accum"] * momentum + g
    if nesterov:
        s["var"] = s["var"] - (g * lr + s["accum"] * momentum * lr)
    else:
        s["var"] = s["var"] - s["accum"] * lr


def np_adam(s, g, b1p, b2p, lr, b1, b2, eps, nesterov=False):
    one = s["var"].dtype.type(1)
    alpha = lr * np.sqrt(one - b2p) / (one - b1p)
    s["m"] = s["m"] + (g - s["m"]) * (one - b1)
    s["v"] = s["v"] + (g * g - s["v"]) * (one - b2)
    m = (g * (one - b1) + b1 * s["m"]) if nesterov else s["m"]
    s["var"] = s["var"] - (m * alpha) / (np.sqrt(s["v"]) + eps)


def np_adagrad(s, g, lr, update_slots=True):
    one = s["var"].dtype.type(1)
    if update_slots:
        s["accum"] = s["accum"] + g * g
    s["var"] = s["var"] - g * lr * (one / np.sqrt(s["accum"]))


def np_rmsprop(s, g, lr, rho, momentum, eps):
    one = s["var"].dtype.type(1)
    s["ms"] = s["ms"] + (g * g - s["ms"]) * (one - rho)
    s["mom"] = s["mom"] * momentum + (g * lr) / np.sqrt(s["ms"] + eps)
    s["var"] = s["var"] - s["mom"]


def np_centered_rmsprop(s, g, lr, rho, momentum, eps):
    one = s["var"].dtype.type(1)
    s["ms"] = s["ms"] + (g * g - s["ms"]) * (one - rho)
    s["mg"] = s["mg"] + (g - s["mg"]) * (one - rho)
    denom = (s["ms"] - s["mg"] * s["mg"]) + eps
    s["mom"] = s["mom"] * momentum + (g * lr) / np.sqrt(denom)
    s["var"] = s["var"] - s["mom"]


def np_adadelta(s, g, lr, rho, eps):
    one = s["var"].dtype.type(1)
    s["accum"] = s["accum"] * rho + g * g * (one - rho)
    upd = np.sqrt(s["accum_update"] + eps) * (one / np.sqrt(s["accum"] + eps)) * g
    s["accum_update"] = s["accum_update"] * rho + upd * upd * (one - rho)
    s["var"] = s["var"] - upd * lr


# name: (wrapper, slot names, slot initial values, scalars, numpy fn, extra attrs)
KERNELS = {
    "ApplyGradientDescent": (tops.apply_gradient_descent, [], [], {"alpha": 0.1}, np_gd, {}),
    "ApplyMomentum": (tops.apply_momentum, ["accum"], [0.0], {"lr": 0.1, "momentum": 0.9},
                      np_momentum, {}),
    "ApplyMomentumNesterov": (tops.apply_momentum, ["accum"], [0.0],
                              {"lr": 0.1, "momentum": 0.9}, np_momentum,
                              {"use_nesterov": True}),
    "ApplyAdam": (tops.apply_adam, ["m", "v"], [0.0, 0.0],
                  {"beta1_power": 0.9, "beta2_power": 0.999, "lr": 0.01, "beta1": 0.9,
                   "beta2": 0.999, "epsilon": 1e-8}, np_adam, {}),
    "ApplyAdamNesterov": (tops.apply_adam, ["m", "v"], [0.0, 0.0],
                          {"beta1_power": 0.81, "beta2_power": 0.998, "lr": 0.01,
                           "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}, np_adam,
                          {"use_nesterov": True}),
    "ApplyAdagrad": (tops.apply_adagrad, ["accum"], [0.1], {"lr": 0.1}, np_adagrad, {}),
    "ApplyAdagradNoSlots": (tops.apply_adagrad, ["accum"], [0.5], {"lr": 0.1}, np_adagrad,
                            {"update_slots": False}),
    "ApplyRMSProp": (tops.apply_rms_prop, ["ms", "mom"], [1.0, 0.0],
                     {"lr": 0.01, "rho": 0.9, "momentum": 0.5, "epsilon": 1e-10},
                     np_rmsprop, {}),
    "ApplyCenteredRMSProp": (tops.apply_centered_rms_prop, ["mg", "ms", "mom"],
                             [0.0, 1.0, 0.0],
                             {"lr": 0.01, "rho": 0.9, "momentum": 0.5, "epsilon": 1e-10},
                             np_centered_rmsprop, {}),
    "ApplyAdadelta": (tops.apply_adadelta, ["accum", "accum_update"], [0.0, 0.0],
                      {"lr": 1.0, "rho": 0.95, "epsilon": 1e-6}, np_adadelta, {}),
}


def update_graph(name, dtype, var0, use_locking=False, read_first=False):
    """The update ``name`` of a variable holding ``var0``: (graph, var, slot variables,
    grad placeholder, update output, reads). With ``read_first`` the update runs after
    ``reads``, each variable's value read in the same step by a kernel whose result is a
    view of it (``Reshape``)."""
    fn, slots, inits, scalars, _, extra = KERNELS[name]
    npdt = dtype.np
    g = tf.Graph()
    with g.as_default():
        var = tf.Variable(np.asarray(var0, npdt), name="var")
        slot_vars = [tf.Variable(np.full(np.shape(var0), v, npdt), name=n)
                     for n, v in zip(slots, inits)]
        grad = tf.placeholder(dtype, np.shape(var0), name="grad")
        sc = {k: tf.constant(v, dtype=dtype, name=k) for k, v in scalars.items()}
        reads = [tf.reshape(x.value(), [-1]) for x in [var] + slot_vars] if read_first \
            else []
        with tf.control_dependencies(reads):
            if name.startswith("ApplyMomentum"):
                out = fn(var, slot_vars[0], sc["lr"], grad, sc["momentum"],
                         use_locking=use_locking, **extra)
            elif name == "ApplyGradientDescent":
                out = fn(var, sc["alpha"], grad, use_locking=use_locking)
            else:
                out = fn(var, *slot_vars, *sc.values(), grad, use_locking=use_locking,
                         **extra)
    return g, var, slot_vars, grad, out, reads


def run_kernel(name, dtype, var0, grads, use_locking=False, check_output=True):
    """Apply ``name`` once per gradient in ``grads``; returns (flowrt states, numpy
    states) after each step."""
    _, slots, inits, scalars, np_fn, extra = KERNELS[name]
    npdt = dtype.np
    g, var, slot_vars, grad, out, _ = update_graph(name, dtype, var0, use_locking)
    assert out.dtype == dtype._as_ref and out.op.type == name.replace(
        "Nesterov", "").replace("NoSlots", "")
    assert out.shape.as_list() == list(np.shape(var0))
    with g.as_default():
        init = tf.global_variables_initializer()
    state = {"var": np.asarray(var0, npdt)}
    state.update({n: np.full(np.shape(var0), v, npdt) for n, v in zip(slots, inits)})
    hp = {k: npdt.type(v) for k, v in scalars.items()}
    np_kw = {"nesterov": True} if extra.get("use_nesterov") else {}
    if extra.get("update_slots") is False:
        np_kw = {"update_slots": False}
    got, want = [], []
    with tf.Session(graph=g) as s:
        s.run(init)
        for gr in grads:
            gr = np.asarray(gr, npdt)
            res = s.run(out, {grad: gr})
            vals = s.run([var] + slot_vars)
            if check_output:
                np.testing.assert_array_equal(res, vals[0])  # the output is var's ref
            got.append(dict(zip(["var"] + slots, vals)))
            with np.errstate(all="ignore"):  # float16 eps underflows: 0/0 on both sides
                np_fn(state, gr, *hp.values(), **np_kw)
            want.append(dict(state))
    return got, want


GRADS = [[0.5, -1.0, 2.0, 0.0], [0.25, 0.5, -3.0, 1.0], [-1.0, 0.1, 0.2, -0.3],
         [2.0, -2.0, 0.5, 0.5]]


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernels_match_numpy_float64_exactly(name):
    got, want = run_kernel(name, tf.float64, [1.0, -2.0, 3.0, 0.5], GRADS)
    for gs, ws in zip(got, want):
        assert gs.keys() == ws.keys()
        for k in gs:
            assert gs[k].dtype == np.float64
            np.testing.assert_array_equal(gs[k], ws[k], err_msg=k)


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("dtype", [tf.float32, tf.float16])
def test_kernels_narrow_dtypes(name, dtype):
    got, want = run_kernel(name, dtype, [1.0, -2.0, 3.0, 0.5], GRADS[:2])
    tol = 1e-6 if dtype == tf.float32 else 5e-3
    for gs, ws in zip(got, want):
        for k in gs:
            assert gs[k].dtype == dtype.np
            np.testing.assert_allclose(gs[k].astype(np.float64), ws[k].astype(np.float64),
                                       rtol=tol, atol=tol, err_msg=k)


def test_kernel_values_by_hand():
    # Adam's first step moves each coordinate by ~lr against the gradient's sign
    got, _ = run_kernel("ApplyAdam", tf.float64, [1.0, 1.0, 1.0, 1.0], [[3.0, -0.5, 1e-3, 0.0]])
    np.testing.assert_allclose(got[0]["var"], [1 - 0.01, 1 + 0.01, 1 - 0.01 * 0.999, 1.0],
                               rtol=1e-3)
    got, _ = run_kernel("ApplyMomentum", tf.float64, [0.0] * 4, [[1.0] * 4, [1.0] * 4])
    np.testing.assert_allclose(got[1]["accum"], [1.9] * 4)
    np.testing.assert_allclose(got[1]["var"], [-0.1 - 0.19] * 4)


def test_scalar_variable_and_complex():
    got, want = run_kernel("ApplyAdagrad", tf.float64, 2.0, [0.5, -0.25])
    np.testing.assert_array_equal(got[1]["var"], want[1]["var"])
    assert got[1]["var"].shape == ()
    got, want = run_kernel("ApplyMomentum", tf.complex128, [1 + 1j, 2 - 1j], [[1j, 1.0]] * 2)
    np.testing.assert_allclose(got[1]["var"], want[1]["var"])


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(sorted(KERNELS)),
       st.lists(st.floats(-3, 3, allow_nan=False, width=32), min_size=1, max_size=6),
       st.integers(0, 2 ** 16))
def test_kernels_random_values(name, var0, seed):
    rng = np.random.default_rng(seed)
    grads = rng.normal(size=(2, len(var0)))
    got, want = run_kernel(name, tf.float64, var0, grads, check_output=False)
    for gs, ws in zip(got, want):
        for k in gs:
            np.testing.assert_array_equal(gs[k], ws[k], err_msg=k)


def test_use_locking_same_results_and_attr():
    got, want = run_kernel("ApplyRMSProp", tf.float64, [1.0, 2.0, 3.0, 4.0], GRADS,
                           use_locking=True)
    np.testing.assert_array_equal(got[-1]["var"], want[-1]["var"])
    with tf.Graph().as_default():
        v = tf.Variable([1.0])
        op = tops.apply_gradient_descent(v, 0.1, [1.0], use_locking=True)
        assert op.op.get_attr("use_locking") is True
        assert tops.apply_gradient_descent(v, 0.1, [1.0]).op.get_attr("use_locking") is False


def _hammer(s, op, n_threads, n_steps):
    def worker():
        for _ in range(n_steps):
            s.run(op)

    ts = [threading.Thread(target=worker) for _ in range(n_threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not any(t.is_alive() for t in ts)


@pytest.mark.parametrize("use_locking", [True, False])
def test_concurrent_updates_are_not_lost(use_locking):
    # With or without use_locking: a whole-array update racing another must not drop it
    # (TF's unlocked in-place updates lose next to nothing; asynchronous training relies
    # on that). Large arrays, so numpy releases the GIL inside each update.
    n_el = 200_000
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(np.zeros(n_el))
        m = tf.Variable(np.zeros(n_el))
        step = tops.apply_momentum(v, m, np.float64(1.0), np.ones(n_el), np.float64(1.0),
                                   use_locking=use_locking)
        c = tf.Variable(np.zeros(n_el))
        add = tf.assign_add(c, np.ones(n_el), use_locking=use_locking)
        sc = tf.Variable(np.zeros(n_el))
        scat = tf.scatter_add(sc, np.arange(0, n_el, 2), np.ones(n_el // 2),
                              use_locking=use_locking)
    n_threads, n_steps = 4, 25
    with tf.Session(graph=g) as s:
        s.run(tf.global_variables_initializer())
        _hammer(s, tf.group(step.op, add.op, scat.op), n_threads, n_steps)
        n = n_threads * n_steps
        vv, mv, cv, sv = s.run([v, m, c, sc])
    assert np.all(mv == n)  # accum = accum + 1 each step
    assert np.all(vv == -n * (n + 1) / 2)  # var -= accum
    assert np.all(cv == n)
    assert np.all(sv[::2] == n) and np.all(sv[1::2] == 0)


# -- updates in place ----------------------------------------------------------------------
IN_PLACE = ["ApplyGradientDescent", "ApplyMomentum", "ApplyMomentumNesterov", "ApplyAdam",
            "ApplyAdamNesterov"]


@pytest.fixture
def sole_checks(monkeypatch):
    """What each update's check for writing in place answered, in order."""
    answers = []
    real = tops._sole_holder

    def spy(refs, vals, npdt, args):
        answers.append(real(refs, vals, npdt, args))
        return answers[-1]

    monkeypatch.setattr(tops, "_sole_holder", spy)
    return answers


@pytest.mark.parametrize("name", IN_PLACE)
@pytest.mark.parametrize("dtype,size", [(tf.float64, 5), (tf.float32, 5),
                                        (tf.float32, (1 << 20) + 37)])
def test_updates_write_in_place_with_the_same_bits(name, dtype, size, sole_checks):
    # Nobody holds the values between steps (nothing is fetched): each update writes into
    # them, in the order of TF's functor, so the numpy formulas give the same bits; the
    # large case runs in ranges on the intra-op threads
    _, slots, inits, scalars, np_fn, extra = KERNELS[name]
    npdt = dtype.np
    rng = np.random.default_rng(size)
    var0 = rng.standard_normal(size).astype(npdt)
    grads = [rng.standard_normal(size).astype(npdt) for _ in range(3)]
    g, var, slot_vars, grad, out, _ = update_graph(name, dtype, var0)
    op = out.op
    state = {"var": var0.copy(), **{n: np.full(size, v, npdt) for n, v in zip(slots, inits)}}
    hp = {k: npdt.type(v) for k, v in scalars.items()}
    kw = {"nesterov": True} if extra.get("use_nesterov") else {}
    with tf.Session(graph=g, config=tf.ConfigProto(intra_op_parallelism_threads=2)) as s:
        s.run(tf.global_variables_initializer())
        for gr in grads:
            s.run(op, {grad: gr})
            np_fn(state, gr, *hp.values(), **kw)
        got = s.run([var] + slot_vars)
    assert sole_checks == [True] * len(grads)
    for k, v in zip(["var"] + slots, got):
        assert v.dtype == npdt
        np.testing.assert_array_equal(v, state[k], err_msg=k)


@pytest.mark.parametrize("name", IN_PLACE)
def test_a_value_somebody_holds_is_not_written(name, sole_checks):
    # Views of the values, made earlier in the same step, are fetched: the update must
    # not change them under the reader, so it stores new arrays instead
    g, var, slot_vars, grad, out, reads = update_graph(name, tf.float64, [1.0, -2.0, 3.0],
                                                       read_first=True)
    op = out.op
    with tf.Session(graph=g) as s:
        s.run(tf.global_variables_initializer())
        s.run(op, {grad: [0.5, 0.5, 0.5]})
        before = s.run([var] + slot_vars)
        got = s.run(reads + [op], {grad: [1.0, -1.0, 2.0]})[:-1]
        for h, b in zip(got, before):
            np.testing.assert_array_equal(h, b)
        assert not np.array_equal(s.run(var), before[0])
    assert sole_checks == [True, False]
    # the gradient applied is the variable's own value, read in the same step
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(np.array([1.0, 2.0]))
        step = tf.train.GradientDescentOptimizer(0.5).apply_gradients([(v.value(), v)])
    with tf.Session(graph=g) as s:
        s.run(tf.global_variables_initializer())
        s.run(step)
        np.testing.assert_array_equal(s.run(v), [0.5, 1.0])


def test_a_reader_racing_an_in_place_update_sees_a_whole_value(sole_checks):
    # Updates in place of a 4M-element variable (all elements equal) racing fetches of it
    # from another thread: every fetched value is one step's, never half of two
    n_el = 1 << 22
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(np.zeros(n_el, np.float32))
        step = tf.train.GradientDescentOptimizer(1.0).apply_gradients(
            [(tf.ones([n_el]), v)])
    with tf.Session(graph=g, config=tf.ConfigProto(intra_op_parallelism_threads=2)) as s:
        s.run(tf.global_variables_initializer())
        stop = threading.Event()
        seen, torn = [], []

        def read():
            while not stop.is_set():
                a = s.run(v)
                lo, hi = float(a.min()), float(a.max())
                seen.append(lo)
                if lo != hi:
                    torn.append((lo, hi))
                del a

        t = threading.Thread(target=read)
        t.start()
        try:
            for _ in range(40):
                s.run(step)
        finally:
            stop.set()
            t.join(30)
        assert not t.is_alive()
        assert s.run(v)[0] == -40.0
    assert torn == [] and len(seen) > 0
    assert True in sole_checks  # (the updates that found no reader wrote in place)


# -- kernel errors ---------------------------------------------------------------------
def test_uninitialized_slot_fails_precondition():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable([1.0, 2.0], name="v")
        acc = tf.Variable([0.0, 0.0], name="accum")
        out = tops.apply_momentum(v, acc, 0.1, [1.0, 1.0], 0.9)
    with tf.Session(graph=g) as s:
        s.run(v.initializer)
        with pytest.raises(errors.FailedPreconditionError,
                           match="Attempting to use uninitialized value accum"):
            s.run(out)
        assert s.run(v).tolist() == [1.0, 2.0]  # nothing was written


def test_runtime_shape_and_scalar_errors():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable([1.0, 2.0])
        grad = tf.placeholder(tf.float32, None)
        lr = tf.placeholder(tf.float32, None)
        out = tops.apply_gradient_descent(v, lr, grad)
        w = tf.Variable([1.0, 2.0], validate_shape=False)
        acc = tf.Variable([1.0, 2.0, 3.0], validate_shape=False)
        out2 = tops.apply_adagrad(w, acc, 0.1, tf.placeholder_with_default([1.0, 1.0], None))
    with tf.Session(graph=g) as s:
        s.run(tf.global_variables_initializer())
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"var and delta do not have the same shape\[2\] \[3\]"):
            s.run(out, {grad: [1.0, 1.0, 1.0], lr: 0.1})
        with pytest.raises(errors.InvalidArgumentError, match=r"alpha is not a scalar: \[2\]"):
            s.run(out, {grad: [1.0, 1.0], lr: [0.1, 0.1]})
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"var and accum do not have the same shape"):
            s.run(out2)
        assert s.run(v).tolist() == [1.0, 2.0]


def test_build_time_errors():
    with tf.Graph().as_default():
        v = tf.Variable([1.0, 2.0])
        acc = tf.Variable([0.0, 0.0])
        with pytest.raises(ValueError, match="Dimension 0 in both shapes must be equal, but "
                           "are 2 and 3"):
            tops.apply_gradient_descent(v, 0.1, [1.0, 2.0, 3.0])
        with pytest.raises(ValueError, match="Shape must be rank 0 but is rank 1"):
            tops.apply_momentum(v, acc, [0.1], [1.0, 1.0], 0.9)
        with pytest.raises(ValueError, match="Shapes must be equal rank, but are 1 and 2"):
            tops.apply_adagrad(v, tf.Variable([[0.0, 0.0]]), 0.1, [1.0, 1.0])
        with pytest.raises(TypeError, match="mutable tensor"):
            tops.apply_gradient_descent(tf.constant([1.0, 2.0]), 0.1, [1.0, 1.0])
        with pytest.raises(TypeError):
            tops.apply_gradient_descent(v, 0.1, tf.constant([1.0, 1.0], tf.float64))


def test_integer_variable_has_no_kernel():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable([1, 2])
        out = tops.apply_gradient_descent(v, 1, [1, 1])
    with tf.Session(graph=g) as s:
        s.run(v.initializer)
        with pytest.raises(errors.InvalidArgumentError, match="No OpKernel was registered"):
            s.run(out)


def test_training_ops_not_differentiable():
    rt = tf.default_runtime()
    for op in ("ApplyGradientDescent", "ApplyAdam", "ApplyMomentum", "ApplyAdagrad",
               "ApplyRMSProp", "ApplyCenteredRMSProp", "ApplyAdadelta"):
        assert rt.gradients[op] is None
        assert rt.op_def(op).inputs[0].is_ref


# ---------------------------------------------------------------------------------------
# optimizers
# ---------------------------------------------------------------------------------------
OPTIMIZERS = {
    "gd": lambda: tf.train.GradientDescentOptimizer(0.1),
    "momentum": lambda: tf.train.MomentumOptimizer(0.05, 0.9),
    "nesterov": lambda: tf.train.MomentumOptimizer(0.05, 0.9, use_nesterov=True),
    "adam": lambda: tf.train.AdamOptimizer(0.1),
    "adagrad": lambda: tf.train.AdagradOptimizer(0.1),
    "rmsprop": lambda: tf.train.RMSPropOptimizer(0.01, momentum=0.5),
    "centered_rmsprop": lambda: tf.train.RMSPropOptimizer(0.01, momentum=0.5, centered=True),
    "adadelta": lambda: tf.train.AdadeltaOptimizer(1.0),
}

# Recorded from TensorFlow (tensorflow.compat.v1, graph mode): w and b after 5 steps of
# opt.minimize(reduce_sum(square(w * b - [0.3, 0.2, -0.1]))) in float64.
TF_GOLDEN = {
    "gd": ([0.32023123314078783, -0.7349310419935401, 1.0787794190623188],
           -0.3040503752592112),
    "momentum": ([0.7399871602188546, -1.5315192362674146, 2.284392625443696],
                 0.49780648388752413),
    "nesterov": ([0.45877711617183004, -0.926030124482865, 1.3869262136894958],
                 -0.16252868118478625),
    "adam": ([0.7290298630704822, -1.5585299920344664, 2.562170490052868],
             0.033562106131836966),
    "adagrad": ([0.9390367251624433, -1.7670095146307463, 2.7681502798620934],
                0.23028224475850356),
    "rmsprop": ([0.9884770516755715, -1.9237793411883821, 2.907610887112639],
                0.3328867147140963),
    "centered_rmsprop": ([0.988926746017193, -1.9226450439266407, 2.9049463579904566],
                         0.3124934821281169),
    "adadelta": ([0.9977334075736926, -1.997726494903124, 2.997726627944355],
                 0.4977247384068182),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_minimize_matches_tensorflow(name):
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(tf.constant([1.0, -2.0, 3.0], dtype=tf.float64), name="w")
        b = tf.Variable(tf.constant(0.5, dtype=tf.float64), name="b")
        loss = tf.reduce_sum(tf.square(w * b - tf.constant([0.3, 0.2, -0.1], tf.float64)))
        train = OPTIMIZERS[name]().minimize(loss)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            for _ in range(5):
                s.run(train)
            wv, bv = s.run([w, b])
    np.testing.assert_allclose(wv, TF_GOLDEN[name][0], rtol=1e-12)
    np.testing.assert_allclose(bv, TF_GOLDEN[name][1], rtol=1e-12)


def _np_optimizer(name, var0, grads):
    """numpy re-implementation of ``name`` with float32 hyper-parameters on a float64
    variable, as TF computes it."""
    s = {"var": np.asarray(var0, np.float64)}
    z = np.zeros_like(s["var"])
    if name == "gd":
        for g in grads:
            np_gd(s, g, f32(0.1))
    elif name in ("momentum", "nesterov"):
        s["accum"] = z
        for g in grads:
            np_momentum(s, g, f32(0.05), f32(0.9), nesterov=name == "nesterov")
    elif name == "adam":
        s["m"], s["v"] = z, z
        b1p, b2p = np.float32(0.9), np.float32(0.999)
        for g in grads:
            np_adam(s, g, np.float64(b1p), np.float64(b2p), f32(0.1), f32(0.9), f32(0.999),
                    f32(1e-8))
            b1p, b2p = b1p * np.float32(0.9), b2p * np.float32(0.999)
    elif name == "adagrad":
        s["accum"] = np.full_like(s["var"], 0.1)
        for g in grads:
            np_adagrad(s, g, f32(0.1))
    elif name in ("rmsprop", "centered_rmsprop"):
        s["ms"], s["mom"] = np.ones_like(s["var"]), z
        if name == "centered_rmsprop":
            s["mg"] = z
        for g in grads:
            fn = np_centered_rmsprop if name == "centered_rmsprop" else np_rmsprop
            fn(s, g, f32(0.01), f32(0.9), f32(0.5), f32(1e-10))
    elif name == "adadelta":
        s["accum"], s["accum_update"] = z, z
        for g in grads:
            np_adadelta(s, g, f32(1.0), f32(0.95), f32(1e-8))
    return s["var"]


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_apply_gradients_matches_numpy_exactly(name):
    rng = np.random.default_rng(0)
    var0 = rng.normal(size=(2, 3))
    grads = rng.normal(size=(4, 2, 3))
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(var0, name="v")
        grad = tf.placeholder(tf.float64, [2, 3])
        train = OPTIMIZERS[name]().apply_gradients([(grad, v)])
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            for gr in grads:
                s.run(train, {grad: gr})
            got = s.run(v)
    np.testing.assert_array_equal(got, _np_optimizer(name, var0, grads))


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_minimize_quadratic_converges(name):
    opt_args = {"gd": (0.1,), "momentum": (0.05, 0.9), "nesterov": (0.05, 0.9),
                "adam": (0.1,), "adagrad": (0.5,), "rmsprop": (0.05,),
                "centered_rmsprop": (0.05,), "adadelta": (1.0, 0.95, 1e-2)}
    cls = {"gd": tf.train.GradientDescentOptimizer, "momentum": tf.train.MomentumOptimizer,
           "nesterov": tf.train.MomentumOptimizer, "adam": tf.train.AdamOptimizer,
           "adagrad": tf.train.AdagradOptimizer, "rmsprop": tf.train.RMSPropOptimizer,
           "centered_rmsprop": tf.train.RMSPropOptimizer,
           "adadelta": tf.train.AdadeltaOptimizer}[name]
    kw = {"use_nesterov": True} if name == "nesterov" else {}
    if name == "centered_rmsprop":
        kw = {"centered": True}
    opt = cls(*opt_args[name], **kw)
    target = np.array([1.5, -0.5, 2.0], np.float32)
    g = tf.Graph()
    with g.as_default():
        x = tf.get_variable("x", [3], initializer=tf.zeros_initializer())
        loss = tf.reduce_sum(tf.square(x - target))
        train = opt.minimize(loss)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            losses = [s.run(loss)]
            for _ in range(300):
                s.run(train)
            losses.append(s.run(loss))
            xv = s.run(x)
    assert losses[-1] < 1e-3 * losses[0]
    np.testing.assert_allclose(xv, target, atol=0.05)


def test_slots_names_and_colocation():
    g = tf.Graph()
    with g.as_default():
        with tf.variable_scope("layer"):
            w = tf.get_variable("w", [2, 3])
        b = tf.get_variable("b", [3])
        loss_grads = [(tf.ones([2, 3]), w), (tf.ones([3]), b)]
        adam = tf.train.AdamOptimizer()
        train = adam.apply_gradients(loss_grads)
        assert adam.get_slot_names() == ["m", "v"]
        m, v = adam.get_slot(w, "m"), adam.get_slot(w, "v")
        assert (m.op.name, v.op.name) == ("layer/w/Adam", "layer/w/Adam_1")
        assert adam.get_slot(b, "m").op.name == "b/Adam"
        assert adam.get_slot(w, "nope") is None and adam.get_slot(tf.Variable(1.0), "m") is None
        for slot in (m, v):
            assert slot.op.colocation_groups() == [b"loc:@layer/w"]
            assert slot.shape.as_list() == [2, 3] and slot.dtype == tf.float32._as_ref
            assert slot not in tf.trainable_variables() and slot in tf.global_variables()
        b1p, b2p = adam._get_beta_accumulators()
        assert (b1p.op.name, b2p.op.name) == ("beta1_power", "beta2_power")
        # colocated with the first variable by name ("b" < "layer/w")
        assert b1p.op.colocation_groups() == [b"loc:@b"]
        assert [x.op.name for x in adam.variables()] == [
            "b/Adam", "b/Adam_1", "beta1_power", "beta2_power", "layer/w/Adam",
            "layer/w/Adam_1"]
        update = g.get_operation_by_name("Adam/update_layer/w/ApplyAdam")
        assert update.colocation_groups() == [b"loc:@layer/w"]
        assert train.name == "Adam" and train.type == "NoOp"
        assert train in tf.get_collection(tf.GraphKeys.TRAIN_OP)
        # a second apply reuses the slots; a second optimizer makes new ones
        adam.apply_gradients(loss_grads)
        assert len(adam.variables()) == 6
        mom = tf.train.MomentumOptimizer(0.1, 0.9)
        mom.apply_gradients(loss_grads)
        mom2 = tf.train.MomentumOptimizer(0.1, 0.9)
        mom2.apply_gradients(loss_grads)
        assert mom.get_slot(w, "momentum").op.name == "layer/w/Momentum"
        assert mom2.get_slot(w, "momentum").op.name == "layer/w/Momentum_1"
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(train)
            s.run(train)
            np.testing.assert_allclose(s.run([b1p, b2p]), [0.9 ** 3, 0.999 ** 3], rtol=1e-6)


def test_other_slot_names_and_initial_values():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable([1.0, 2.0], name="v")
        gv = [(tf.constant([0.0, 0.0]), v)]
        opts = [tf.train.AdagradOptimizer(0.1, initial_accumulator_value=0.25),
                tf.train.RMSPropOptimizer(0.1, centered=True), tf.train.AdadeltaOptimizer()]
        for o in opts:
            o.apply_gradients(gv)
        ada, rms, delta = opts
        assert ada.get_slot_names() == ["accumulator"]
        assert rms.get_slot_names() == ["mg", "momentum", "rms"]
        assert delta.get_slot_names() == ["accum", "accum_update"]
        names = [rms.get_slot(v, n).op.name for n in ("rms", "mg", "momentum")]
        assert names == ["v/RMSProp", "v/RMSProp_1", "v/RMSProp_2"]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            assert s.run(ada.get_slot(v, "accumulator")).tolist() == [0.25, 0.25]
            assert s.run(rms.get_slot(v, "rms")).tolist() == [1.0, 1.0]
            assert s.run(rms.get_slot(v, "mg")).tolist() == [0.0, 0.0]


def test_global_step_increments_after_updates():
    g = tf.Graph()
    with g.as_default():
        x = tf.Variable(5.0, name="x")
        gs = tf.train.get_or_create_global_step()
        assert gs.op.name == "global_step" and gs.dtype == tf.int64._as_ref
        assert gs.shape.as_list() == [] and gs not in tf.trainable_variables()
        assert tf.get_collection(tf.GraphKeys.GLOBAL_STEP) == [gs]
        assert tf.train.get_global_step() is gs and tf.train.get_or_create_global_step() is gs
        train = tf.train.GradientDescentOptimizer(0.5).apply_gradients(
            [(tf.constant(2.0), x)], global_step=gs, name="step")
        assert train.name == "step" and train.type == "AssignAdd"
        upd = g.get_operation_by_name("step/update")
        one = train.inputs[1].op  # created under the dependency: it carries it (TF's rule)
        assert one.name == "step/value" and upd in one.control_inputs
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            for i in range(3):
                s.run(train)
                assert tf.train.global_step(s, gs) == i + 1
            assert s.run(x) == 2.0


def test_global_step_functions():
    g = tf.Graph()
    assert tf.train.get_global_step(g) is None
    gs = tf.train.create_global_step(g)
    assert gs.graph is g and tf.train.get_global_step(g) is gs
    with pytest.raises(ValueError, match='"global_step" already exists'):
        tf.train.create_global_step(g)
    g2 = tf.Graph()
    with g2.as_default():
        t = tf.Variable(0, name="global_step")  # found by name when not in the collection
        assert tf.train.get_global_step() is not None
        assert tf.train.get_global_step().name == t.name
        with pytest.raises(TypeError, match="integer type"):
            tf.train.assert_global_step(tf.Variable(0.0))
        with pytest.raises(TypeError, match="not scalar"):
            tf.train.assert_global_step(tf.Variable([0, 1]))
        with pytest.raises(TypeError, match="must be a Variable or Tensor"):
            tf.train.assert_global_step(3)


def test_learning_rate_tensor_callable_and_placeholder():
    g = tf.Graph()
    with g.as_default():
        a, b, c = (tf.Variable(1.0, name=n) for n in "abc")
        lr = tf.placeholder(tf.float32, [])
        ops = [tf.train.GradientDescentOptimizer(tf.constant(0.5)).apply_gradients(
                   [(tf.constant(1.0), a)]),
               tf.train.GradientDescentOptimizer(lambda: 0.25).apply_gradients(
                   [(tf.constant(1.0), b)]),
               tf.train.MomentumOptimizer(lr, 0.0).apply_gradients([(tf.constant(1.0), c)])]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(ops, {lr: 0.125})
            assert s.run([a, b, c]) == [0.5, 0.75, 0.875]


def test_var_list_gate_and_compute_gradients():
    g = tf.Graph()
    with g.as_default():
        x = tf.Variable(3.0, name="x")
        y = tf.Variable(4.0, name="y")
        z = tf.Variable(1.0, name="z")  # not in the loss
        loss = x * x + y
        opt = tf.train.GradientDescentOptimizer(0.1)
        gv = opt.compute_gradients(loss)
        assert [v for _, v in gv] == [x, y, z] and gv[2][0] is None
        gv2 = opt.compute_gradients(loss, var_list=[y], gate_gradients=opt.GATE_GRAPH)
        train = opt.minimize(loss, var_list=[x])
        none_gate = opt.minimize(loss, var_list=(x, y), gate_gradients=opt.GATE_NONE)
        with pytest.raises(ValueError, match="gate_gradients must be one of"):
            opt.compute_gradients(loss, gate_gradients=7)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            assert s.run([gv[0][0], gv[1][0]]) == [6.0, 1.0]
            assert s.run(gv2[0][0]) == 1.0
            s.run(train)
            np.testing.assert_allclose(s.run([x, y]), [3.0 - 0.6, 4.0])
            s.run(none_gate)
            np.testing.assert_allclose(s.run([x, y]), [2.4 - 0.48, 3.9])


def test_optimizer_errors():
    g = tf.Graph()
    with g.as_default():
        opt = tf.train.GradientDescentOptimizer(0.1)
        with pytest.raises(ValueError, match="No variables to optimize"):
            opt.minimize(tf.constant(1.0))
        v = tf.Variable(1.0, name="v")
        w = tf.Variable(2.0, name="w", trainable=False)
        with pytest.raises(ValueError, match="No gradients provided for any variable"):
            opt.minimize(w * 2.0)  # v does not affect the loss
        with pytest.raises(ValueError, match="No variables provided"):
            opt.apply_gradients([])
        with pytest.raises(ValueError, match=r"No gradients provided for any variable: "
                           r"\[\"<tf.Variable 'v:0'"):
            opt.apply_gradients([(None, v)])
        with pytest.raises(ValueError, match=r"Invalid type tf.int32 for Const"):
            opt.compute_gradients(tf.constant(1))
        with pytest.raises(TypeError, match="Gradient must be convertible to a Tensor"):
            opt.apply_gradients([(object(), v)])
        with pytest.raises(NotImplementedError, match="Trying to optimize unsupported type"):
            opt.compute_gradients(v * 1.0, var_list=["v"])
        t = v * 1.0
        gv = opt.compute_gradients(t * 2.0, var_list=[t])  # gradients w.r.t. a tensor
        with pytest.raises(NotImplementedError, match="Trying to update a Tensor"):
            opt.apply_gradients(gv)
    with pytest.raises(ValueError, match="initial_accumulator_value must be positive"):
        tf.train.AdagradOptimizer(0.1, initial_accumulator_value=0.0)
    with pytest.raises(ValueError, match="Must specify the optimizer name"):
        tf.train.Optimizer(False, "")
    with pytest.raises(NotImplementedError):
        tf.train.Optimizer(False, "Base")._apply_dense(None, None)


def test_uninitialized_slots_raise_failed_precondition():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable([1.0], name="v")
        opt = tf.train.MomentumOptimizer(0.1, 0.9)
        train = opt.apply_gradients([(tf.constant([1.0]), v)])
    with tf.Session(graph=g) as s:
        s.run(v.initializer)
        with pytest.raises(errors.FailedPreconditionError,
                           match="Attempting to use uninitialized value v/Momentum"):
            s.run(train)


def test_use_locking_constraint_and_name_scope():
    g = tf.Graph()
    with g.as_default():
        v = tf.get_variable("v", initializer=tf.constant([3.0, -3.0]),
                            constraint=lambda t: tf.maximum(t, 0.0))
        opt = tf.train.AdamOptimizer(1.0, use_locking=True)
        with tf.name_scope("outer"):
            train = opt.apply_gradients([(tf.constant([1.0, 1.0]), v)])
        apply = g.get_operation_by_name("outer/Adam/update_v/ApplyAdam")
        assert apply.get_attr("use_locking") is True
        assert train.name == "outer/Adam"
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(train)
            np.testing.assert_allclose(s.run(v), [2.0, 0.0], atol=1e-6)  # -4 clipped to 0


def test_multiple_dtypes_in_one_optimizer():
    g = tf.Graph()
    with g.as_default():
        a = tf.Variable(np.float16(1.0), name="a")
        b = tf.Variable(np.float64(1.0), name="b")
        train = tf.train.AdamOptimizer(0.1).apply_gradients(
            [(tf.constant(np.float16(1.0)), a), (tf.constant(1.0, tf.float64), b)])
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(train)
            av, bv = s.run([a, b])
    assert av.dtype == np.float16 and bv.dtype == np.float64
    np.testing.assert_allclose([av, bv], [0.9, 0.9], rtol=2e-3)


# -- learning rate decay ---------------------------------------------------------------
def test_decay_functions():
    g = tf.Graph()
    with g.as_default():
        step = tf.placeholder(tf.int64, [])
        ed = tf.train.exponential_decay(0.1, step, 10, 0.5)
        eds = tf.train.exponential_decay(0.1, step, 10, 0.5, staircase=True, name="ed")
        itd = tf.train.inverse_time_decay(0.1, step, 10, 0.5)
        ned = tf.train.natural_exp_decay(0.1, step, 10, 0.5)
        pd = tf.train.polynomial_decay(0.1, step, 10, end_learning_rate=0.01, power=2.0)
        pdc = tf.train.polynomial_decay(0.1, step, 10, end_learning_rate=0.01, cycle=True)
        pc = tf.train.piecewise_constant(step, [5, 10], [1.0, 0.5, 0.1])
        assert eds.op.name == "ed" and ed.dtype == tf.float32
        with pytest.raises(ValueError, match="global_step is required"):
            tf.train.exponential_decay(0.1, None, 10, 0.5)
        with pytest.raises(ValueError, match="length of boundaries"):
            tf.train.piecewise_constant(step, [5], [1.0])
        with pytest.raises(ValueError, match="same dtype as x"):
            tf.train.piecewise_constant(step, [5.0], [1.0, 2.0])
        with tf.Session() as s:
            for t in (0, 5, 7, 10, 15, 25):
                vals = s.run([ed, eds, itd, ned, pd, pdc, pc], {step: t})
                pt = min(t, 10) / 10
                cyc = 10 * max(1, int(np.ceil(t / 10)))
                want = [0.1 * 0.5 ** (t / 10), 0.1 * 0.5 ** (t // 10), 0.1 / (1 + 0.5 * t / 10),
                        0.1 * np.exp(-0.5 * t / 10), 0.09 * (1 - pt) ** 2 + 0.01,
                        0.09 * (1 - t / cyc) + 0.01,
                        1.0 if t <= 5 else 0.5 if t <= 10 else 0.1]
                np.testing.assert_allclose(vals, want, rtol=1e-5, err_msg=str(t))


def test_decayed_learning_rate_drives_optimizer():
    g = tf.Graph()
    with g.as_default():
        x = tf.Variable(0.0)
        gs = tf.train.get_or_create_global_step()
        lr = tf.train.exponential_decay(1.0, gs, 1, 0.5)
        train = tf.train.GradientDescentOptimizer(lr).apply_gradients(
            [(tf.constant(-1.0), x)], global_step=gs)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            for _ in range(4):
                s.run(train)
            assert s.run(x) == 1.0 + 0.5 + 0.25 + 0.125
