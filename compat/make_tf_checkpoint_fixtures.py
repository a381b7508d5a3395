"""Write the TensorFlow checkpoint fixtures of tests/data/tf_ckpt/ (run with the TF venv:
``TF_USE_LEGACY_KERAS=1 ../tf-venv/bin/python compat/make_tf_checkpoint_fixtures.py``).

- ``bundle/b``: a V2 bundle written by ``SaveV2`` of tensors of every dtype, strings,
  scalars, empty tensors and slices; ``bundle.json`` says the order and specs, and
  ``bundle_values.npz`` / the JSON hold the values (bfloat16 as uint16 bits), so that
  flowrt can write the same tensors and compare the bytes.
- ``model/model.ckpt-3``: a TF1 model trained 3 steps with Adam (a partitioned
  embedding, a global step, an int32, a float64, a bool and a string variable);
  ``model.json`` holds every saved tensor's value and the losses of 3 more steps.
- ``v1/model.ckpt`` (+ ``.meta``): the same kind of variables saved by a V1 Saver.
No pickle: numeric values in .npz (allow_pickle off), strings in JSON.
"""
import json
import os
import shutil

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                   "tf_ckpt")
shutil.rmtree(OUT, ignore_errors=True)
os.makedirs(OUT)
rng = np.random.RandomState(7)

# -- 1. a raw bundle of every dtype ----------------------------------------------------------
DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64",
          "uint8", "uint16", "uint32", "uint64", "bool", "complex64", "complex128"]
names, specs, values, tf_dtypes = [], [], {}, []
for i, d in enumerate(DTYPES):
    shape = [(2, 3), (4,), (), (3, 1, 2)][i % 4]
    if d == "bool":
        v = np.asarray(rng.rand(*shape) > 0.5)
    elif d.startswith("complex"):
        v = np.asarray(rng.randn(*shape) + 1j * rng.randn(*shape)).astype(d)
    elif d == "bfloat16":
        v = np.asarray(rng.randn(*shape)).astype(np.float32)
    elif d.startswith(("int", "uint")):
        info = np.iinfo(d)
        v = np.asarray(rng.randint(max(info.min, -1000), min(info.max, 1000), size=shape)).astype(d)
    else:
        v = np.asarray(rng.randn(*shape)).astype(d)
    names.append(f"t_{d}")
    specs.append("")
    values[f"t_{d}"] = v
    tf_dtypes.append(getattr(tf, d))
names += ["t_empty", "z_scalar"]
specs += ["", ""]
values["t_empty"] = np.zeros((0, 3), np.float32)
values["z_scalar"] = np.float64(2.5)
tf_dtypes += [tf.float32, tf.float64]
strings = {"s_strings": [[b"hello", b""], [b"\x00\xffbytes", "\u00e9t\u00e9".encode()]],
           "s_scalar": b"one string", "s_empty": []}
for k in strings:
    names.append(k)
    specs.append("")
    tf_dtypes.append(tf.string)
# slices: a [6, 3] tensor in two row slices, one column-sliced with "-" rows
full = rng.randn(6, 3).astype(np.float32)
values["emb_full"] = full
for spec, piece in (("6 3 0,4:0,3", full[0:4]), ("6 3 4,2:0,3", full[4:6])):
    names.append("emb")
    specs.append(spec)
    tf_dtypes.append(tf.float32)
    values[f"emb|{spec}"] = piece
cols = rng.randint(0, 100, size=(4, 5)).astype(np.int64)
values["cols_full"] = cols
for spec, piece in (("4 5 -:0,2", cols[:, 0:2]), ("4 5 -:2,3", cols[:, 2:5])):
    names.append("cols")
    specs.append(spec)
    tf_dtypes.append(tf.int64)
    values[f"cols|{spec}"] = piece
names.append("whole_by_slice")
specs.append("2 2 0,2:0,2")
tf_dtypes.append(tf.int32)
values["whole_by_slice|2 2 0,2:0,2"] = np.array([[1, 2], [3, 4]], np.int32)


def tensor_for(k, spec, dt):
    key = k if not spec else f"{k}|{spec}"
    if dt == tf.string:
        return tf.constant(np.array(strings[k], dtype=object).reshape(np.shape(strings[k]))
                           if strings[k] != [] else np.zeros([0], dtype=object),
                           dtype=tf.string)
    v = values[key]
    if dt == tf.bfloat16:
        return tf.cast(tf.constant(v), tf.bfloat16)
    return tf.constant(v, dtype=dt)


os.makedirs(os.path.join(OUT, "bundle"))
with tf.Graph().as_default():
    ts = [tensor_for(k, s, d) for k, s, d in zip(names, specs, tf_dtypes)]
    save = tf.raw_ops.SaveV2(prefix=os.path.join(OUT, "bundle", "b"), tensor_names=names,
                             shape_and_slices=specs, tensors=ts)
    bf = tf.bitcast(ts[DTYPES.index("bfloat16")], tf.uint16)
    with tf.Session() as s:
        s.run(save)
        values["t_bfloat16_bits"] = s.run(bf)
del values["t_bfloat16"]
np.savez(os.path.join(OUT, "bundle_values.npz"),
         **{k.replace("|", "@").replace(" ", "_").replace(",", "c").replace(":", "_")
            .replace("-", "m"): v for k, v in values.items()})
with open(os.path.join(OUT, "bundle.json"), "w") as f:
    json.dump({"names": names, "specs": specs,
               "dtypes": [d.name for d in tf_dtypes],
               "strings": {k: np.array(v, dtype=object).reshape(-1).tolist() and
                           [x.hex() for x in np.array(v, dtype=object).reshape(-1)]
                           for k, v in strings.items()},
               "string_shapes": {k: list(np.shape(np.array(v, dtype=object)))
                                 for k, v in strings.items()}}, f, indent=1)

# -- 2. a trained TF1 model -----------------------------------------------------------------
X = rng.randn(8, 4).astype(np.float32)
IDS = rng.randint(0, 12, size=8).astype(np.int64)
Y = rng.randn(8, 1).astype(np.float32)


def build():
    """The model (also built by the flowrt test): returns loss, train op, saver."""
    gs = tf.train.get_or_create_global_step()
    emb = tf.get_variable("emb", [12, 4], partitioner=tf.fixed_size_partitioner(3),
                          initializer=tf.random_normal_initializer(seed=1))
    w = tf.get_variable("dense/w", [4, 1], initializer=tf.random_normal_initializer(seed=2))
    b = tf.get_variable("dense/b", [1], initializer=tf.zeros_initializer())
    tf.get_variable("counter", [], tf.int32, initializer=tf.constant_initializer(5),
                    trainable=False)
    tf.get_variable("scale64", [2], tf.float64,
                    initializer=tf.constant_initializer([0.5, 1.5]), trainable=False)
    tf.get_variable("flags", [3], tf.bool, initializer=tf.constant_initializer(True),
                    trainable=False)
    tf.get_variable("vocab", [3], tf.string,
                    initializer=tf.constant_initializer(["a", "bb", ""]), trainable=False)
    h = tf.nn.embedding_lookup(emb, tf.constant(IDS)) * tf.constant(X)
    pred = tf.matmul(h, w) + b
    loss = tf.reduce_mean(tf.square(pred - tf.constant(Y)))
    train = tf.train.AdamOptimizer(0.05).minimize(loss, global_step=gs)
    return loss, train


os.makedirs(os.path.join(OUT, "model"))
with tf.Graph().as_default():
    loss, train = build()
    saver = tf.train.Saver()
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        before = [float(s.run([loss, train])[0]) for _ in range(3)]
        saver.save(s, os.path.join(OUT, "model", "model.ckpt"), global_step=3,
                   write_meta_graph=False)
        after = [float(s.run([loss, train])[0]) for _ in range(3)]
reader = tf.train.NewCheckpointReader(os.path.join(OUT, "model", "model.ckpt-3"))
model_values = {}
for k, shape in sorted(reader.get_variable_to_shape_map().items()):
    v = reader.get_tensor(k)
    dt = reader.get_variable_to_dtype_map()[k].name
    if dt == "string":
        model_values[k] = {"dtype": dt, "shape": list(np.shape(v)),
                           "hex": [x.hex() for x in np.array(v, dtype=object).reshape(-1)]}
    else:
        model_values[k] = {"dtype": dt, "shape": list(np.shape(v)),
                           "value": np.asarray(v).reshape(-1).tolist()}
with open(os.path.join(OUT, "model.json"), "w") as f:
    json.dump({"losses_before": before, "losses_after": after, "values": model_values,
               "x": X.tolist(), "ids": IDS.tolist(), "y": Y.tolist(),
               "debug_string_hex": reader.debug_string().hex()}, f, indent=1)

# -- 3. a V1 checkpoint ---------------------------------------------------------------------
os.makedirs(os.path.join(OUT, "v1"))
with tf.Graph().as_default():
    emb = tf.get_variable("emb", [6, 2], partitioner=tf.fixed_size_partitioner(2),
                          initializer=tf.random_normal_initializer(seed=3))
    w = tf.get_variable("w", initializer=tf.constant([1.0, 2.0, 3.0]))
    n = tf.get_variable("n", initializer=tf.constant(7, tf.int64))
    sv = tf.get_variable("s", initializer=tf.constant([b"x", b"yz"]))
    out = tf.reduce_sum(emb) * tf.reduce_sum(w)
    saver = tf.train.Saver(write_version=tf.train.SaverDef.V1)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        saver.save(s, os.path.join(OUT, "v1", "model.ckpt"))
        v1_out = float(s.run(out))
        v1_emb = s.run(tf.concat(list(emb), 0)) if not hasattr(emb, "as_tensor") else \
            s.run(emb.as_tensor())
with open(os.path.join(OUT, "v1.json"), "w") as f:
    json.dump({"emb": v1_emb.tolist(), "w": [1.0, 2.0, 3.0],
               "n": 7, "s": ["x", "yz"], "out": v1_out,
               "shapes": tf.train.list_variables(os.path.join(OUT, "v1", "model.ckpt"))}, f)
os.remove(os.path.join(OUT, "v1", "checkpoint"))
with open(os.path.join(OUT, "model", "checkpoint"), "w") as f:  # relative, as TF allows
    f.write('model_checkpoint_path: "model.ckpt-3"\n'
            'all_model_checkpoint_paths: "model.ckpt-3"\n')
total = sum(os.path.getsize(os.path.join(r, x)) for r, _, fs in os.walk(OUT) for x in fs)
print(sorted(os.path.relpath(os.path.join(r, x), OUT) for r, _, fs in os.walk(OUT)
             for x in fs), total, "bytes")
