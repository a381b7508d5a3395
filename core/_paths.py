"""The import paths of flowrt's modules from before the layer packages.

``flowrt.graph``, ``flowrt.session``, ``flowrt.executor`` ... are what users, plugins and
older code import; the modules now live in layer packages (``flowrt.framework.graph``,
``flowrt.framework.session``, ``flowrt.engine.executor``, see docs/architecture.md).
Each old path is the *same module object* as its new one, so private names,
monkeypatching and ``isinstance`` checks keep working, and nothing is loaded twice.

A module that ``import flowrt`` has already loaded is registered under its old name
at once (:func:`register_loaded`); the others are resolved on first import by a
``sys.meta_path`` finder, so ``import flowrt`` stays cheap.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Any, Sequence

#: old submodule name -> its module in the layer packages
MOVED: dict[str, str] = {
    # base: values every layer uses
    "dtypes": "base.dtypes", "tensor_shape": "base.tensor_shape", "errors": "base.errors",
    "device_spec": "base.device_spec", "threads": "base.threads",
    # plugin: the contracts plugins implement and the runtime that loads them
    "runtime": "plugin.runtime", "hookspecs": "plugin.hookspecs",
    "op_registry": "plugin.op_registry", "device": "plugin.device",
    "transport": "plugin.transport", "passes": "plugin.passes",
    "resources": "plugin.resources",
    # engine: one step, from graph IR to kernels
    "ir": "engine.ir", "placement": "engine.placement", "cost_model": "engine.cost_model",
    "partition": "engine.partition", "executor": "engine.executor",
    "rendezvous": "engine.rendezvous",
    # service: the master and worker services
    "master": "service.master", "worker": "service.worker",
    # distributed: the wire and the processes of a cluster
    "rpc": "distributed.rpc", "ir_wire": "distributed.ir_wire",
    "server": "distributed.server", "cluster": "distributed.cluster",
    "shm": "distributed.shm",
    # framework: the client's graph and session
    "graph": "framework.graph", "graph_def": "framework.graph_def",
    "gradients": "framework.gradients", "session": "framework.session",
    "compat": "framework.compat",
    # training: the TF1 API on top
    "variables": "training.variables", "variable_scope": "training.variable_scope",
    "saver": "training.saver", "checkpoint": "training.checkpoint",
    "monitored_session": "training.monitored_session",
    "coordinator": "training.coordinator", "device_setter": "training.device_setter",
    "gradient_checker": "training.gradient_checker",
    # tools
    "cli": "tools.cli", "demo": "tools.demo", "testing": "tools.testing",
    "visualize": "tools.visualize", "timeline": "tools.timeline", "client": "tools.client",
}


class _AliasLoader(importlib.abc.Loader):
    """Loads an old path by importing the new module and handing back that object."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was executed under its own name."""

    def get_code(self, fullname: str) -> Any:
        """The new module's code, for ``python -m flowrt.<old name>`` (runpy)."""
        spec = importlib.util.find_spec(self.target)
        if spec is None or spec.loader is None:
            raise ImportError(f"no module {self.target}")
        return spec.loader.get_code(self.target)  # type: ignore[attr-defined]

    def is_package(self, fullname: str) -> bool:
        """Old paths name plain modules."""
        return False


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds ``flowrt.<old name>`` for every name in :data:`MOVED`."""

    def __init__(self, package: str) -> None:
        self.prefix = package + "."
        self.package = package

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(self.prefix):
            return None
        new = MOVED.get(fullname[len(self.prefix):])
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(
            fullname, _AliasLoader(f"{self.package}.{new}"))


def install(package: str) -> None:
    """Put the finder for ``package``'s old paths on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _AliasFinder) and f.package == package for f in sys.meta_path):
        sys.meta_path.append(_AliasFinder(package))


def register_loaded(package: str) -> None:
    """Register the old names of the modules already imported, so importing one of
    them finds it in ``sys.modules`` (and never rebinds the package attribute of the
    same name: ``flowrt.device`` is the ``tf.device`` function, not the module)."""
    for old, new in MOVED.items():
        mod = sys.modules.get(f"{package}.{new}")
        if mod is not None:
            sys.modules.setdefault(f"{package}.{old}", mod)
