"""Generate ``docs/api_coverage.md``: which ``tensorflow.compat.v1`` names flowrt has.

Run from the TensorFlow environment (``make coverage``)::

    TF_USE_LEGACY_KERAS=1 python compat/coverage.py [--out docs/api_coverage.md] [--missing MODULE]

For each module of the model-building API (and the top level), the public names of
``tensorflow.compat.v1.<module>`` are split into: names flowrt has, names it lacks, and
names left out on purpose (each with its reason). ``--missing nn`` prints the names one
module lacks, one per line, for a quick to-do list.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

#: the modules the table covers ("" is the top level), in the order the table shows them
MODULES = ["", "nn", "nn.rnn_cell", "layers", "losses", "metrics", "math", "linalg",
           "image", "sparse", "strings", "compat", "signal", "spectral", "debugging",
           # issue 17: input pipelines, summaries, the program shell
           "data", "data.experimental", "io", "python_io", "summary", "app", "flags",
           "logging", "gfile", "queue",
           # issue 18: TF's files
           "train", "saved_model", "graph_util",
           # issue 21: clusters from schedulers
           "distribute.cluster_resolver"]

_TF2 = "TF 2.x only (not in TF 1.15)"

#: names left out on purpose, by module, with the reason (a name ending in "*" is a
#: prefix); TF2-only names and contrib / estimator / keras / tpu are out of scope
OUT_OF_SCOPE: dict[str, dict[str, str]] = {
    "": {
        "keras": "Keras is out of scope (issue 16)",
        "estimator": "Estimator is out of scope (issue 16)",
        "contrib": "contrib is out of scope (issue 16)",
        "tpu": "TPUs are out of scope (issue 16)",
        "lite": "TF Lite is out of scope",
        "autograph": "TF2 eager-to-graph conversion; flowrt is graph mode only",
        "function": "tf.function is TF2's API; flowrt is graph mode only",
        "enable_eager_execution": "flowrt is graph mode only",
        "enable_v2_behavior": "flowrt is graph mode only",
        "enable_v2_tensorshape": "flowrt is graph mode only",
        "enable_control_flow_v2": "flowrt runs TF1 control flow",
        "enable_resource_variables": "flowrt has TF1 ref variables",
        "enable_tensor_equality": "flowrt is graph mode only",
        "experimental": "TF2 experimental namespace",
        "xla": "XLA is out of scope",
        "mlir": "MLIR is out of scope",
        "tpu*": "TPUs are out of scope",
        "distribute": "tf.distribute strategies are TF2's API",
        "fftnd": _TF2, "ifftnd": _TF2, "rfftnd": _TF2, "irfftnd": _TF2,
        "conv": _TF2, "conv2d_backprop_filter_v2": _TF2, "conv2d_backprop_input_v2": _TF2,
        "approx_top_k": _TF2, "GradientTape": "eager only; flowrt is graph mode only",
        # not in TF 1.15's v1 API (tensorflow/tools/api/golden/v1/tensorflow.pbtxt of
        # the 1.15 line lists tensor_scatter_nd_add/sub/update only, no check_pinned,
        # no CXX_VERSION, no types or mixed_precision module); added in TF 2.x
        "tensor_scatter_nd_max": _TF2, "tensor_scatter_nd_min": _TF2,
        "check_pinned": _TF2, "random_index_shuffle": _TF2,
        "ragged_fill_empty_rows": _TF2, "ragged_fill_empty_rows_grad": _TF2,
        "NoneTensorSpec": _TF2, "CXX_VERSION": _TF2, "types": _TF2,
        "mixed_precision": _TF2,
    },
    "signal": {n: _TF2 for n in ("fftnd", "ifftnd", "rfftnd", "irfftnd", "mdct",
                                 "inverse_mdct", "kaiser_window",
                                 "kaiser_bessel_derived_window", "vorbis_window")},
    "debugging": {**{n: _TF2 for n in (
        "enable_check_numerics", "disable_check_numerics", "enable_traceback_filtering",
        "disable_traceback_filtering", "is_traceback_filtering_enabled",
        "get_log_device_placement", "set_log_device_placement")},
        "experimental": "TF2 experimental namespace"},
    "math": {"approx_max_k": _TF2, "approx_min_k": _TF2, "sobol_sample": _TF2},
    "sparse": {"bincount": _TF2},
    "image": {"decode_webp": _TF2, "decode_jxl": _TF2,
              "generate_bounding_box_proposals": _TF2},
    "linalg": {"LinearOperatorBlockLowerTriangular": _TF2, "eigh_tridiagonal": _TF2,
               "experimental": "TF2 experimental namespace"},
    "nn": {
        "rnn_cell": "a module (covered as nn.rnn_cell)",
        "experimental": "TF2 experimental namespace",
        "approx_max_k": _TF2, "approx_min_k": _TF2,
        "quantized_avg_pool": "quantized dtypes and their ops are out of scope",
        "quantized_conv2d": "quantized dtypes and their ops are out of scope",
        "quantized_max_pool": "quantized dtypes and their ops are out of scope",
        "quantized_relu_x": "quantized dtypes and their ops are out of scope",
    },
    "compat": {
        "v2": "TF2's API is out of scope",
    },
    "layers": {
        "experimental": "TF2 experimental namespace",
    },
    # TF 1.15's v1 tf.io and tf.data (api golden files of the 1.15 line) lack these
    "io": {"RaggedFeature": _TF2 + "; flowrt has no RaggedTensor", "decode_webp": _TF2,
           "decode_jxl": _TF2},
    "data": {"ThreadingOptions": _TF2 + " (TF 1.15 has it as tf.data.experimental.ThreadingOptions)"},
    "data.experimental": {**{n: _TF2 for n in (
        "AutoShardPolicy", "AutotuneAlgorithm", "AutotuneOptions", "DatasetInitializer",
        "ExternalStatePolicy", "SHARD_HINT", "ServiceOptions", "distributed_save",
        "enable_debug_mode", "from_list", "from_variant", "to_variant", "get_model_proto",
        "get_structure", "index_table_from_dataset", "table_from_dataset",
        "pad_to_cardinality", "service", "snapshot")},
        "RaggedTensorStructure": _TF2 + "; flowrt has no RaggedTensor",
        "dense_to_ragged_batch": _TF2 + "; flowrt has no RaggedTensor"},
    "saved_model": {n: _TF2 + " (object-based SavedModel)" for n in (
        "Asset", "SaveOptions", "experimental", "load_v2", "save")},
    "train": {
        "sdca_fprint": "SDCA linear-model ops (used by contrib/estimator only)",
        "sdca_optimizer": "SDCA linear-model ops (used by contrib/estimator only)",
        "sdca_shrink_l1": "SDCA linear-model ops (used by contrib/estimator only)",
        "do_quantize_training_on_graphdef": "deprecated quantized-training rewrite; "
                                            "quantized dtypes are out of scope",
        "experimental": "mixed-precision loss scaling; float16 rewrite is out of scope",
    },
    "distribute.cluster_resolver": {
        "TPUClusterResolver": "needs TPUs (tpu is out of scope)",
        "GCEClusterResolver": "needs the Google Compute Engine API client "
                              "(googleapiclient); not a scheduler flowrt targets",
        "KubernetesExecutableLocation": _TF2,
    },
}


def _public(mod: Any) -> list[str]:
    return sorted(n for n in dir(mod) if not n.startswith("_"))


def _reason(module: str, name: str) -> str | None:
    table = OUT_OF_SCOPE.get(module, {})
    if table.get(name):
        return table[name]
    for k, v in table.items():
        if k.endswith("*") and v and name.startswith(k[:-1]):
            return v
    return None


def _resolve(root: Any, dotted: str) -> Any:
    obj = root
    for part in filter(None, dotted.split(".")):
        obj = getattr(obj, part)
    return obj


def survey() -> dict[str, dict[str, list[Any]]]:
    """``{module: {"have": [...], "lack": [...], "out": [(name, reason)]}}``."""
    import tensorflow.compat.v1 as tf1

    import flowrt

    out: dict[str, dict[str, list[Any]]] = {}
    for module in MODULES:
        tmod = _resolve(tf1, module)
        try:
            fmod = _resolve(flowrt, module)
        except AttributeError:
            fmod = None
        have, lack, left = [], [], []
        for name in _public(tmod):
            why = _reason(module, name)
            if why:
                left.append((name, why))
            elif fmod is not None and hasattr(fmod, name):
                have.append(name)
            else:
                lack.append(name)
        out[module] = {"have": have, "lack": lack, "out": left}
    return out


def render(data: dict[str, dict[str, list[Any]]], tf_version: str) -> str:
    """The markdown page."""
    lines = ["# API coverage against `tensorflow.compat.v1`", "",
             f"Generated by `make coverage` (`compat/coverage.py`) against TensorFlow "
             f"{tf_version}. For each module: the public names of "
             "`tensorflow.compat.v1.<module>` that flowrt has, those it lacks, and those "
             "left out on purpose (with the reason). In-scope coverage is "
             "have / (have + lack).", "",
             "| module | have | lack | out of scope | in-scope coverage |",
             "|---|---:|---:|---:|---:|"]
    for module, d in data.items():
        n = len(d["have"]) + len(d["lack"])
        pct = 100.0 * len(d["have"]) / n if n else 100.0
        lines.append(f"| `tf.{module or '*'}` | {len(d['have'])} | {len(d['lack'])} | "
                     f"{len(d['out'])} | {pct:.0f}% |")
    for module, d in data.items():
        lines += ["", f"## `tf.{module}`" if module else "## top level (`tf.*`)", ""]
        if d["lack"]:
            lines.append("**Lacks:** " + ", ".join(f"`{n}`" for n in d["lack"]))
            lines.append("")
        if d["out"]:
            lines.append("**Out of scope:**")
            lines += [f"- `{n}`: {why}" for n, why in d["out"]]
            lines.append("")
        lines.append("**Has:** " + ", ".join(f"`{n}`" for n in d["have"]))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="write the markdown page here")
    ap.add_argument("--missing", metavar="MODULE", default=None,
                    help="print the names MODULE lacks ('' for the top level)")
    args = ap.parse_args(argv)
    import tensorflow as tf

    data = survey()
    if args.missing is not None:
        print("\n".join(data[args.missing]["lack"]))
        return 0
    text = render(data, tf.__version__)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
