"""Write tests/data/tf_meta/ with TensorFlow (run from the checkout with
``TF_USE_LEGACY_KERAS=1 ../tf-venv/bin/python compat/make_tf_meta_graph_fixtures.py``).

- ``model.ckpt-3.meta`` / ``.index`` / ``.data-*``: a model with a partitioned embedding
  (tf.nn.embedding_lookup over a fixed_size_partitioner), a dense layer, a while_loop, a
  FIFOQueue with a QueueRunner, Adam, a global step, summaries and plain collections,
  saved after 3 training steps;
- ``frozen.pb``: the same model's prediction after 3 more steps, frozen by
  convert_variables_to_constants (its output: ``frozen_pred``);
- ``expected.npz``: the feeds, the prediction and loss at the checkpoint, the losses of 3
  further training steps, and the gradient of the loop's output;
- ``op_types.json``: the op types of further TF-written graphs (tf.layers, dynamic_rnn,
  tf.data iterators) that flowrt must know to import them.
"""
import json
import os

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                   "tf_meta")


def build(ids, x, y):
    """The model: returns (pred, loss, train_op, loop_out)."""
    emb = tf.get_variable("emb", [10, 3], partitioner=tf.fixed_size_partitioner(2),
                          initializer=tf.random_uniform_initializer(-1.0, 1.0, seed=1))
    e = tf.nn.embedding_lookup(emb, ids)
    h = tf.concat([e, x], axis=1)
    w_loop = tf.get_variable("w_loop", [], initializer=tf.constant_initializer(0.7))
    _, loop_out = tf.while_loop(lambda i, a: i < 3,
                                lambda i, a: (i + 1, a * 0.5 + tf.tanh(a) * w_loop),
                                [tf.constant(0), h], name="loop")
    pred = tf.identity(tf.layers.dense(loop_out, 1, name="dense",
                                       kernel_initializer=tf.constant_initializer(0.3)),
                       name="pred")
    loss = tf.losses.mean_squared_error(y, pred)
    gs = tf.train.get_or_create_global_step()
    train_op = tf.train.AdamOptimizer(0.05).minimize(loss, global_step=gs)
    tf.add_to_collection("train_op", train_op)
    tf.summary.scalar("loss", loss)
    q = tf.FIFOQueue(4, [tf.float32], shapes=[[2]], name="fifo")
    enq = q.enqueue([tf.constant([1.0, 2.0])], name="fifo_enqueue")
    tf.train.add_queue_runner(tf.train.QueueRunner(q, [enq]))
    tf.identity(q.dequeue(), name="dequeued")
    tf.add_to_collection("my_ints", 3)
    tf.add_to_collection("my_ints", 4)
    tf.add_to_collection("my_floats", 1.5)
    tf.add_to_collection("my_strs", "hello")
    tf.add_to_collection("my_nodes", pred)
    return pred, loss, train_op, loop_out


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.RandomState(0)
    feed_ids = np.array([0, 3, 7, 9], np.int64)
    feed_x = rng.rand(4, 2).astype(np.float32)
    feed_y = rng.rand(4, 1).astype(np.float32)
    out = {"ids": feed_ids, "x": feed_x, "y": feed_y}
    with tf.Graph().as_default() as g:
        ids = tf.placeholder(tf.int64, [None], name="ids")
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        y = tf.placeholder(tf.float32, [None, 1], name="y")
        pred, loss, train_op, loop_out = build(ids, x, y)
        w_loop = [v for v in tf.global_variables() if v.op.name == "w_loop"][0]
        gw = tf.gradients(tf.reduce_sum(loop_out), w_loop)[0]
        saver = tf.train.Saver()
        feed = {ids: feed_ids, x: feed_x, y: feed_y}
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            out["train_losses"] = np.array([s.run([loss, train_op], feed)[0]
                                            for _ in range(3)], np.float32)
            prefix = saver.save(s, os.path.join(OUT, "model.ckpt"), global_step=3)
            out["pred"], out["loss"], out["grad_w_loop"] = s.run([pred, loss, gw], feed)
            out["more_losses"] = np.array([s.run([loss, train_op], feed)[0]
                                           for _ in range(3)], np.float32)
            frozen = tf.graph_util.convert_variables_to_constants(
                s, g.as_graph_def(), ["pred"])
            out["frozen_pred"] = s.run(pred, feed)
        print("saved", prefix)
    # the gradient ops were added after the save: the .meta has the forward graph only
    tf.io.write_graph(frozen, OUT, "frozen.pb", as_text=False)
    np.savez(os.path.join(OUT, "expected.npz"), **out)
    if os.path.exists(os.path.join(OUT, "checkpoint")):
        os.remove(os.path.join(OUT, "checkpoint"))
    json.dump(op_types(), open(os.path.join(OUT, "op_types.json"), "w"), indent=1)
    print(sorted(os.listdir(OUT)))


def op_types() -> dict:
    """Op types of TF-written graphs of common models, by model."""
    found = {}
    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [None, 8, 8, 1])
        h = tf.layers.conv2d(x, 2, 3)
        h = tf.layers.max_pooling2d(h, 2, 2)
        h = tf.layers.batch_normalization(tf.layers.flatten(h), training=True)
        h = tf.layers.dropout(tf.layers.dense(h, 4, activation=tf.nn.relu), training=True)
        loss = tf.reduce_mean(tf.square(h))
        with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
            tf.train.AdamOptimizer().minimize(loss)
        found["layers_adam"] = sorted({op.type for op in g.get_operations()})
    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [2, 5, 3])
        cell = tf.nn.rnn_cell.LSTMCell(4)
        o, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
        tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(o))
        found["dynamic_rnn"] = sorted({op.type for op in g.get_operations()})
    with tf.Graph().as_default() as g:
        ds = tf.data.Dataset.from_tensor_slices(np.arange(10)).map(lambda v: v * 2)
        ds = ds.shuffle(4, seed=1).batch(3).repeat()
        it = tf.data.make_initializable_iterator(ds)
        it.get_next()
        it2 = tf.data.make_one_shot_iterator(tf.data.Dataset.range(3))
        it2.get_next()
        found["tf_data"] = sorted({op.type for op in g.get_operations()})
    with tf.Graph().as_default() as g:
        emb = tf.get_variable("e", [8, 2], partitioner=tf.fixed_size_partitioner(3))
        ids = tf.placeholder(tf.int64, [None])
        for strategy in ("mod", "div"):
            tf.nn.embedding_lookup(emb, ids, partition_strategy=strategy)
        tf.nn.embedding_lookup_sparse(emb, tf.SparseTensor([[0, 0]], [1], [1, 1]), None)
        tf.train.Saver(sharded=True)
        found["partitioned"] = sorted({op.type for op in g.get_operations()})
    return found


if __name__ == "__main__":
    main()
