"""Random ops: the values differ by design, so only dtypes, shapes, names, error classes,
ranges, rough moments and seeding behaviour are compared."""
from __future__ import annotations

import numpy as np
import pytest

from compat_harness import Run, Steps, module, run_both, run_custom


def _progs(d: dict) -> list:
    return [pytest.param(v, id=k) for k, v in sorted(d.items())]


RANDOM_PROGRAMS = {
    "uniform": lambda tf: tf.random_uniform([3, 4]),
    "uniform_range": lambda tf: tf.random_uniform([1000], minval=-2.0, maxval=5.0),
    "uniform_float64": lambda tf: tf.random_uniform([5], dtype=tf.float64),
    "uniform_float16": lambda tf: tf.random_uniform([5], dtype=tf.float16),
    "uniform_int": lambda tf: tf.random_uniform([1000], minval=-3, maxval=4, dtype=tf.int32),
    "uniform_int64": lambda tf: tf.random_uniform([10], maxval=10, dtype=tf.int64),
    "uniform_int_no_maxval": lambda tf: tf.random_uniform([3], dtype=tf.int32),
    "uniform_int_empty_range": lambda tf: tf.random_uniform([3], 5, 5, dtype=tf.int32),
    "uniform_bad_dtype": lambda tf: tf.random_uniform([3], dtype=tf.string),
    "uniform_tensor_shape": lambda tf: tf.random_uniform(tf.constant([2, 2])),
    "uniform_fed_shape": lambda tf: (lambda s: Run(tf.random_uniform(s), {s: [2, 5]}))(
        tf.placeholder(tf.int32, [2])),
    "uniform_scalar": lambda tf: tf.random_uniform([]),
    "uniform_tensor_bounds": lambda tf: tf.random_uniform([100], tf.constant(1.0),
                                                          tf.constant(2.0)),
    "random_uniform_v2_name": lambda tf: tf.random.uniform([2]),
    "normal": lambda tf: tf.random_normal([2000], mean=3.0, stddev=0.5),
    "normal_float64": lambda tf: tf.random_normal([3, 2], dtype=tf.float64),
    "normal_int": lambda tf: tf.random_normal([3], dtype=tf.int32),
    "truncated_normal": lambda tf: tf.truncated_normal([2000], mean=-1.0, stddev=2.0),
    "truncated_normal_float16": lambda tf: tf.truncated_normal([4], dtype=tf.float16),
    "shuffle": lambda tf: tf.random_shuffle(tf.range(20)),
    "shuffle_rows": lambda tf: tf.random_shuffle(tf.reshape(tf.range(12), [4, 3])),
    "shuffle_scalar": lambda tf: tf.random_shuffle(tf.constant(3)),
    "multinomial": lambda tf: tf.multinomial(tf.log([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]), 50),
    "multinomial_int32": lambda tf: tf.multinomial(tf.log([[0.2, 0.8]]), 4,
                                                   output_dtype=tf.int32),
    "categorical": lambda tf: tf.random.categorical(tf.log([[0.1, 0.9]]), 5),
    "gamma": lambda tf: tf.random_gamma([100], alpha=[1.0, 5.0]),
    "gamma_beta": lambda tf: tf.random_gamma([10, 2], alpha=tf.constant([[0.5], [2.0]]),
                                             beta=3.0, dtype=tf.float64),
    "poisson": lambda tf: tf.random_poisson([1.0, 10.0], [100]),
    "random_crop": lambda tf: tf.random_crop(tf.reshape(tf.range(30), [5, 6]), [2, 3]),
    "random_crop_too_big": lambda tf: tf.random_crop(tf.reshape(tf.range(30), [5, 6]), [6, 3]),
    "seeded_op": lambda tf: tf.random_uniform([4], seed=7),
    "dropout": lambda tf: tf.nn.dropout(tf.ones([100]), keep_prob=0.3),
}

# ranges / properties each implementation's samples must satisfy
CHECKS = {
    "uniform": lambda r: (r >= 0).all() and (r < 1).all(),
    "uniform_range": lambda r: (r >= -2).all() and (r < 5).all() and abs(r.mean() - 1.5) < 0.5,
    "uniform_int": lambda r: (r >= -3).all() and (r < 4).all() and len(set(r.tolist())) == 7,
    "uniform_int64": lambda r: (r >= 0).all() and (r < 10).all(),
    "uniform_tensor_bounds": lambda r: (r >= 1).all() and (r < 2).all(),
    "normal": lambda r: abs(r.mean() - 3.0) < 0.1 and abs(r.std() - 0.5) < 0.1,
    "truncated_normal": lambda r: (abs(r + 1.0) <= 4.0).all() and abs(r.mean() + 1.0) < 0.3,
    "shuffle": lambda r: sorted(r.tolist()) == list(range(20)),
    "shuffle_rows": lambda r: sorted(map(tuple, r.tolist())) == [(0, 1, 2), (3, 4, 5),
                                                                (6, 7, 8), (9, 10, 11)],
    "multinomial": lambda r: (r[0] < 2).all() and (r[1] == 2).all(),
    "categorical": lambda r: ((r >= 0) & (r < 2)).all(),
    "gamma": lambda r: (r > 0).all() and abs(r[:, 1].mean() - 5.0) < 1.5,
    "poisson": lambda r: (r >= 0).all() and (r == np.round(r)).all(),
    "random_crop": lambda r: r[0, 1] == r[0, 0] + 1 and r[1, 0] == r[0, 0] + 6,
    "dropout": lambda r: np.all((r == 0) | np.isclose(r, 1 / 0.3, rtol=1e-6)),
}


@pytest.mark.parametrize("name", sorted(RANDOM_PROGRAMS))
def test_random_ops(name):
    prop = CHECKS.get(name)

    def check(tf, results):
        if prop is not None:
            assert prop(np.asarray(results[0])), f"{name}: property violated: {results[0]}"

    run_both(RANDOM_PROGRAMS[name], values=False, check=check)


def test_random_ops_differ_between_runs_and_ops():
    def program(tf):
        a = tf.random_uniform([50])
        b = tf.random_uniform([50])
        return Steps([a, b], [a, b])

    def check(tf, results):
        (a1, b1), (a2, _) = results
        assert not np.array_equal(a1, b1), "two unseeded ops gave the same values"
        assert not np.array_equal(a1, a2), "a second run repeated the first"

    run_both(program, values=False, check=check)


def _seed_facts(tf, graph_seed, op_seed):
    """Whether values repeat across sessions / across runs for a seeding setup."""
    g = tf.get_default_graph()
    if graph_seed is not None:
        tf.set_random_seed(graph_seed)
    x = tf.random_uniform([20], seed=op_seed)
    y = tf.random_normal([20], seed=op_seed)
    with tf.Session(graph=g) as s:
        first = s.run([x, y])
        second = s.run([x, y])
    with tf.Session(graph=g) as s:
        again = s.run([x, y])
    return {
        "x_repeats_across_sessions": bool(np.array_equal(first[0], again[0])),
        "y_repeats_across_sessions": bool(np.array_equal(first[1], again[1])),
        "x_changes_between_runs": not np.array_equal(first[0], second[0]),
    }


@pytest.mark.parametrize("graph_seed,op_seed", [(None, None), (1, None), (None, 5), (1, 5)])
def test_seeding_determinism(graph_seed, op_seed):
    run_custom(lambda tf: _seed_facts(tf, graph_seed, op_seed))


def test_get_seed():
    def fn(tf):
        out = [tf.get_seed(None), tf.get_seed(3)]
        tf.set_random_seed(10)
        out += [tf.get_seed(None), tf.get_seed(4)]
        return [tuple(v) if isinstance(v, tuple) else v for v in out]

    run_custom(fn)


def test_get_seed_op_seed_from_graph_tf115():
    # With a graph seed and no op seed, TF 1.15's get_seed takes the op seed from the
    # graph's last op id (random_seed.py: ``op_seed = ops.get_default_graph()._last_id``),
    # so two calls with no op created between give the same pair. TF 2.x counts calls per
    # graph instead (0, 1, 2, ...), which these checks confirm is still the case.
    def fn(tf):
        tf.set_random_seed(10)
        out = [tf.get_seed(None), tf.get_seed(None)]
        tf.random_uniform([1])  # TF 1.15: shape, min, max, RandomUniform, sub, mul, add
        out.append(tf.get_seed(None))
        return [tuple(v) for v in out]

    real_tf, tf = module("tf"), module("flowrt")
    with real_tf.Graph().as_default():
        assert fn(real_tf)[:2] == [(10, 0), (10, 1)]
    with tf.Graph().as_default():
        assert fn(tf) == [(10, 0), (10, 0), (10, 7)]


def test_random_op_static_info_unknown_shape():
    def program(tf):
        s = tf.placeholder(tf.int32, [None])
        return Run([tf.random_uniform(s), tf.random_normal(s), tf.truncated_normal(s)],
                   {s: [2, 3]})

    run_both(program, values=False)
