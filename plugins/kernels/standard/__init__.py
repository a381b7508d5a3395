"""The standard kernel set: TF 1.15 graph-mode ops with numpy/CuPy kernels.

Kernels are written against ``ctx.xp`` (the device's array module), so the same kernel
serves numpy on CPU and CuPy on GPU; device-specific kernels override where the two
libraries differ. Every submodule adds its ops, kernels, gradients and API functions to
the one :data:`ks` kernel set.
"""
from __future__ import annotations

from flowrt.hookspecs import hookimpl

from ._common import ks

# Importing the submodules fills ``ks``; their order does not matter.
from . import essential  # noqa: F401,E402
from . import state_ops  # noqa: F401,E402
from . import math_ops  # noqa: F401,E402
from . import array_ops  # noqa: F401,E402
from . import nn_ops  # noqa: F401,E402
from . import random_ops  # noqa: F401,E402
from . import logging_ops  # noqa: F401,E402
from . import control_flow_ops  # noqa: F401,E402
from . import control_flow_grad  # noqa: F401,E402
from . import rnn_ops  # noqa: F401,E402
from . import rnn_seq_ops  # noqa: F401,E402
from . import init_ops  # noqa: F401,E402
from . import training_ops  # noqa: F401,E402
from . import optimizers  # noqa: F401,E402
from . import math_grad  # noqa: F401,E402
from . import array_grad  # noqa: F401,E402
from . import nn_grad  # noqa: F401,E402
from . import data_flow_ops  # noqa: F401,E402
from . import tensor_array_ops  # noqa: F401,E402
from . import functional_ops  # noqa: F401,E402
from . import io_ops  # noqa: F401,E402
from . import extra_ops  # noqa: F401,E402
from . import cluster_api  # noqa: F401,E402
from . import server_api  # noqa: F401,E402
from . import training_api  # noqa: F401,E402
from . import linalg_ops  # noqa: F401,E402
from . import special_math_ops  # noqa: F401,E402
from . import nn_conv_ops  # noqa: F401,E402
from . import nn_loss_ops  # noqa: F401,E402
from . import image_ops  # noqa: F401,E402
from . import sparse_ops  # noqa: F401,E402
from . import string_ops  # noqa: F401,E402
from . import modeling_api  # noqa: F401,E402
from . import graph_api  # noqa: F401,E402
from . import spectral_ops  # noqa: F401,E402
from . import check_ops  # noqa: F401,E402
from . import scatter_more_ops  # noqa: F401,E402
from . import top_level_ops  # noqa: F401,E402
from . import top_level_io  # noqa: F401,E402
from . import quantize_ops  # noqa: F401,E402
from . import top_level_specs  # noqa: F401,E402
from . import top_level_critical  # noqa: F401,E402
from . import records_api  # noqa: F401,E402
from . import parsing_ops  # noqa: F401,E402
from . import summary_ops  # noqa: F401,E402
from . import summary_api  # noqa: F401,E402
from . import shell_api  # noqa: F401,E402
from . import reader_ops  # noqa: F401,E402
from . import dataset_kernels  # noqa: F401,E402
from . import inputs_api  # noqa: F401,E402
from . import proto_ops  # noqa: F401,E402
from . import saved_model_api  # noqa: F401,E402
from . import cluster_resolver_api  # noqa: F401,E402
from . import stitch_ops  # noqa: F401,E402
from . import interop_api  # noqa: F401,E402
from . import optimizers_more  # noqa: F401,E402
from . import train_more_api  # noqa: F401,E402
from . import passes  # noqa: E402

__all__ = ["ks", "flowrt_kernel_sets", "flowrt_graph_passes"]


@hookimpl
def flowrt_kernel_sets() -> list:
    return [ks]


@hookimpl
def flowrt_graph_passes() -> list:
    """Constant folding, CSE, pruning and elementwise fusion (see ``passes``)."""
    return passes.graph_passes()
