"""Write tests/data/tf_partitioned/model.ckpt with TensorFlow (run with ../tf-venv/bin/python):
``emb`` [6, 2] float32 = arange(12) partitioned in 3 slices, ``w`` = [1, 2, 3]."""
import os
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()
out = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "tf_partitioned")
os.makedirs(out, exist_ok=True)
with tf.Graph().as_default():
    emb = tf.get_variable("emb", [6, 2], partitioner=tf.fixed_size_partitioner(3))
    w = tf.get_variable("w", initializer=tf.constant([1.0, 2.0, 3.0]))
    assign = emb.assign(tf.constant(np.arange(12, dtype=np.float32).reshape(6, 2)))
    saver = tf.train.Saver()
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(assign)
        saver.save(s, os.path.join(out, "model.ckpt"), write_meta_graph=False)
for f in sorted(os.listdir(out)):
    if f == "checkpoint":
        os.remove(os.path.join(out, f))
print(sorted(os.listdir(out)))
