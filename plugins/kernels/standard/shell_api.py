"""Publishes the program shell of TF 1.15: ``tf.gfile`` / ``tf.io.gfile``
(:mod:`flowrt.framework.gfile`), ``tf.logging`` (:mod:`flowrt.tools.tf_logging`),
``tf.app`` and ``tf.flags`` / ``tf.app.flags`` (:mod:`flowrt.tools.shell_app`), and
``tf.train.write_graph`` / ``tf.io.write_graph`` / ``tf.train.checkpoints_iterator``
(:mod:`flowrt.training.graph_io`) and ``tf.train.Supervisor``
(:mod:`flowrt.tools.supervisor`).

Each core module lists its exports in an ``API`` table; this module adds them to the
standard kernel set, as ``modeling_api`` does for the model-building API.
"""
from __future__ import annotations

from flowrt.framework import gfile
from flowrt.tools import shell_app, supervisor, tf_logging
from flowrt.training import graph_io

from ._common import publish

#: the core modules whose ``API`` tables are published here
MODULES = (gfile, tf_logging, shell_app, graph_io, supervisor)

publish(*MODULES)
