"""Lazily filled API namespaces (``flowrt.nn``, ``flowrt.math`` ...).

Op functions live in kernel-set plugins; a namespace resolves ``flowrt.nn.relu`` to the
kernel set's export ``"nn.relu"`` on first access, through the default runtime. Nothing
here builds a runtime at import time.
"""
from __future__ import annotations

import sys
import types
from typing import Any
from ..plugin.runtime import default_runtime

__all__ = ["LazyNamespace", "install_namespaces", "NAMESPACES"]

#: Sub-namespaces of ``flowrt`` whose members come (partly) from plugins.
NAMESPACES = ("nn", "math", "random", "linalg", "train", "initializers", "layers",
              "debugging", "strings", "bitwise", "image", "losses", "metrics", "summary",
              "sparse", "signal", "saved_model", "io", "data", "user_ops", "logging",
              "keras", "sets", "test", "graph_util", "quantization", "lite", "distribute",
              "estimator", "feature_column", "app", "flags", "profiler", "python_io",
              "resource_loader", "sysconfig", "manip", "spectral", "nn.rnn_cell", "queue",
              "train.queue_runner", "gfile", "io.gfile", "app.flags", "data.experimental",
              "distribute.cluster_resolver")


class LazyNamespace(types.ModuleType):
    """A module whose missing attributes are looked up in the runtime's API table."""

    def __init__(self, name: str, prefix: str, static: dict[str, Any] | None = None):
        super().__init__(name)
        self._prefix = prefix
        if static:
            self.__dict__.update(static)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        from ..plugin.runtime import default_runtime

        api = default_runtime().api
        key = self._prefix + attr
        if key in api:
            value = api[key]
            return value
        raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}"
                             f"{default_runtime().missing_api_note(key)}")

    def __dir__(self) -> list[str]:

        names = set(self.__dict__)
        p = self._prefix
        names.update(k[len(p):] for k in default_runtime().api
                     if k.startswith(p) and "." not in k[len(p):])
        return sorted(n for n in names if not n.startswith("_"))


def install_namespaces(root: str, parent: types.ModuleType) -> dict[str, LazyNamespace]:
    made: dict[str, LazyNamespace] = {}
    for ns in NAMESPACES:
        full = f"{root}.{ns}"
        mod = sys.modules.get(full)
        if not isinstance(mod, LazyNamespace):
            mod = LazyNamespace(full, ns + ".")
            sys.modules[full] = mod
        made[ns] = mod
        head, _, tail = ns.rpartition(".")
        owner = made[head] if head else parent
        setattr(owner, tail, mod)
    return made
