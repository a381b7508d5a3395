"""The :class:`Runtime`: one plugin manager and the registries built from it.

No runtime exists at import time. :func:`default_runtime` creates the process-wide one
on first use; host applications may build their own (``Runtime(block=["zmq"])``) and
pass it to graphs and sessions.
"""
from __future__ import annotations

import difflib
import importlib
import os
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import pluggy

from . import hookspecs
from ..base import VERSION
from ..base.errors import NotFoundError
from .transport import DeferredTransport
from ..base.device_spec import canonical_type

__all__ = ["Runtime", "PluginInfo", "default_runtime", "set_default_runtime",
           "BUILTIN_PLUGINS", "ESSENTIAL_PLUGINS", "PluginError"]

#: The core's own plugins, registered by every runtime before any other and never
#: blocked (as pytest's ``essential_plugins``): the essential kernel set defines the ops
#: the core inserts or needs to run any graph (``_Send``, ``_Recv``, ``Const``,
#: ``Identity``, ``NoOp``, ``Placeholder``). Named by module so that this layer imports
#: nothing above it.
ESSENTIAL_PLUGINS: dict[str, str] = {
    "essential": "flowrt.engine.essential",
}

#: Built-in plugins by entry-point name. They are loaded through the ``flowrt``
#: entry-point group like any other; this list lets a vendored or frozen copy without
#: installed metadata still find them, and marks them as exempt from the autoload switch.
BUILTIN_PLUGINS: dict[str, str] = {
    "cpu": "flowrt.plugins.devices.cpu",
    "cuda": "flowrt.plugins.devices.cuda",
    "inproc": "flowrt.plugins.transports.inproc",
    "grpc": "flowrt.plugins.transports.grpc_plugin",
    "zmq": "flowrt.plugins.transports.zmq_plugin",
    "standard": "flowrt.plugins.kernels.standard",
    "cuda_kernels": "flowrt.plugins.kernels.cuda",
}


class PluginError(ValueError):
    """A plugin conflict: two plugins registering the same name, or a bad hook result."""


@dataclass
class PluginInfo:
    """What ``flowrt plugins`` shows for one plugin."""

    name: str
    module: str
    distribution: str | None = None
    version: str | None = None
    builtin: bool = False
    status: str = "loaded"  # loaded | failed | blocked | disabled
    error: str | None = None
    provides: dict[str, list[str]] = field(default_factory=dict)
    #: what the runtime left out of what this plugin registered, and why (a kernel for
    #: an op that no loaded plugin defines, a ``supports`` predicate that raised)
    notes: list[str] = field(default_factory=list)


def _did_you_mean(name: str, options: Iterable[str]) -> str:
    m = difflib.get_close_matches(name, list(options), n=3, cutoff=0.6)
    return f" Did you mean {', '.join(repr(x) for x in m)}?" if m else ""


class Runtime:
    """Owns a pluggy ``PluginManager`` and the registries merged from its plugins.

    :param block: plugin names never to load (also ``FLOWRT_BLOCK_PLUGINS=a,b``)
    :param autoload: load third-party entry points (default: unless
        ``FLOWRT_DISABLE_PLUGIN_AUTOLOAD`` is set); built-ins always load
    :param plugins: extra plugin objects or modules to register, as ``{name: obj}``
    :param builtins: load the built-in plugins (False gives an empty runtime for tests)
    """

    def __init__(self, block: Iterable[str] = (), autoload: bool | None = None,
                 plugins: dict[str, Any] | None = None, builtins: bool = True):
        """Record the configuration; plugins load on first use (:attr:`pm`).

        :raises PluginError: when ``block`` or ``FLOWRT_BLOCK_PLUGINS`` names an
            essential plugin.
        """
        env_block = os.environ.get("FLOWRT_BLOCK_PLUGINS", "")
        self.blocked = set(block) | {b.strip() for b in env_block.split(",") if b.strip()}
        refused = sorted(self.blocked & set(ESSENTIAL_PLUGINS))
        if refused:
            where = ("FLOWRT_BLOCK_PLUGINS" if refused[0] not in set(block)
                     else "Runtime(block=...)")
            raise PluginError(
                f"plugin {refused[0]!r} cannot be blocked ({where}): it is the core's "
                f"essential kernel set (the ops partitioning, feeds and fetches need: "
                f"_Send, _Recv, Const, Identity, NoOp, Placeholder). Block the plugins "
                f"that provide other ops (e.g. 'standard') instead.")
        if autoload is None:
            autoload = not os.environ.get("FLOWRT_DISABLE_PLUGIN_AUTOLOAD")
            why = "FLOWRT_DISABLE_PLUGIN_AUTOLOAD is set"
        else:
            why = "Runtime(autoload=False) was given"
        self.autoload = autoload
        #: why third-party entry points are not loaded (None while they are)
        self.autoload_off_reason: str | None = None if autoload else why
        self._builtins = builtins
        self._extra = dict(plugins or {})
        self._lock = threading.RLock()
        self._pm: pluggy.PluginManager | None = None
        self._infos: dict[str, PluginInfo] = {}
        self._device_types: dict[str, Any] | None = None
        self._transports: dict[str, Any] | None = None
        self._ops: dict[str, Any] | None = None
        self._kernels: dict[tuple[str, str], Any] = {}
        self._gradients: dict[str, Any] = {}
        self._api: dict[str, Any] = {}
        #: plugins whose kernel sets were merged (a later failure cannot hide an API name)
        self._kernel_set_plugins: set[str] = set()
        self._passes: list[Any] | None = None

    # -- plugin loading ---------------------------------------------------------------
    @property
    def plugins(self) -> dict[str, PluginInfo]:
        """``{plugin name: PluginInfo}`` for every plugin found (loading them first)."""
        _ = self.pm
        return self._infos

    @property
    def pm(self) -> pluggy.PluginManager:
        """The plugin manager, built (and plugins loaded) on first access."""
        if self._pm is None:
            with self._lock:
                if self._pm is None:
                    pm = pluggy.PluginManager("flowrt")
                    pm.add_hookspecs(hookspecs)
                    self._load(pm)
                    self._pm = pm
        return self._pm

    def _load(self, pm: pluggy.PluginManager) -> None:
        """Register every plugin with ``pm`` and record a :class:`PluginInfo` for each:
        the essential plugins first, then the ``flowrt`` entry points (built-ins in
        their listed order, then the others by name), then built-ins without an entry
        point, then the ``plugins`` given to the constructor. Blocked plugins, and
        third-party ones while autoload is off, are recorded but not loaded.

        :raises PluginError: when two plugins have the same name.
        """
        # read once per runtime; importlib.metadata is not loaded by `import flowrt`
        from importlib.metadata import entry_points

        seen: set[str] = set()
        try:
            eps = list(entry_points(group="flowrt"))
        except Exception:  # pragma: no cover - broken metadata
            eps = []
        # a deterministic order whatever sys.path looks like: built-ins first, in their
        # listed order, then third-party plugins by name
        order = list(BUILTIN_PLUGINS)
        eps.sort(key=lambda ep: (0, order.index(ep.name), "") if ep.name in BUILTIN_PLUGINS
                 else (1, 0, ep.name))
        if self._builtins:  # the essential plugins first; never blocked (see __init__)
            for name, mod in ESSENTIAL_PLUGINS.items():
                seen.add(name)
                info = self._infos[name] = PluginInfo(name, mod, "flowrt", VERSION, True)
                self._register(pm, info, lambda mod=mod: importlib.import_module(mod))
        for ep in eps:
            if ep.name in seen:
                other = self._infos[ep.name]
                raise PluginError(f"two plugins are named {ep.name!r}: {other.module} "
                                  f"({other.distribution}) and {ep.value} "
                                  f"({getattr(ep.dist, 'name', None)})")
            seen.add(ep.name)
            dist = getattr(ep, "dist", None)
            builtin = ep.name in BUILTIN_PLUGINS and ep.value == BUILTIN_PLUGINS[ep.name]
            if builtin and not self._builtins:
                continue
            info = PluginInfo(ep.name, ep.value, getattr(dist, "name", None),
                              getattr(dist, "version", None), builtin)
            self._infos[ep.name] = info
            if ep.name in self.blocked:
                info.status = "blocked"
                continue
            if not builtin and not self.autoload:
                info.status = "disabled"
                info.error = self.autoload_off_reason
                continue
            self._register(pm, info, lambda ep=ep: ep.load())
        if self._builtins:
            for name, mod in BUILTIN_PLUGINS.items():
                if name in seen:
                    continue
                info = PluginInfo(name, mod, "flowrt", VERSION, True)
                self._infos[name] = info
                if name in self.blocked:
                    info.status = "blocked"
                    continue
                try:
                    importlib.util.find_spec(mod)  # type: ignore[attr-defined]
                except (ImportError, ValueError):
                    pass
                self._register(pm, info, lambda mod=mod: importlib.import_module(mod))
        for name, obj in self._extra.items():
            if name in self._infos and self._infos[name].status == "loaded":
                raise PluginError(f"two plugins are named {name!r}: "
                                  f"{self._infos[name].module} and {obj!r}")
            info = PluginInfo(name, getattr(obj, "__name__", repr(obj)), None, None, False)
            self._infos[name] = info
            if name in self.blocked:
                info.status = "blocked"
                continue
            self._register(pm, info, lambda obj=obj: obj)

    def _register(self, pm: pluggy.PluginManager, info: PluginInfo, load: Any) -> None:
        """Load a plugin with ``load()`` and register it with ``pm`` as ``info.name``.
        It never raises: a load error, a refused registration or a ``flowrt_`` hook that
        no hookspec defines marks ``info`` failed, with the error; a built-in whose
        module this build lacks is dropped from the plugin list."""
        try:
            obj = load()
        except ModuleNotFoundError as e:
            if info.builtin and e.name and info.module.startswith(e.name):
                # A built-in that is not part of this build (e.g. not written yet).
                del self._infos[info.name]
                return
            info.status, info.error = "failed", f"{type(e).__name__}: {e}"
            return
        except Exception as e:
            info.status = "failed"
            info.error = f"{type(e).__name__}: {e}"
            info.__dict__["traceback"] = traceback.format_exc()
            return
        try:
            pm.register(obj, name=info.name)
        except Exception as e:  # a wrong hook signature, or the object twice
            info.status, info.error = "failed", f"{type(e).__name__}: {e}"
            return
        unknown = [h for h in dir(obj) if h.startswith("flowrt_")
                   and callable(getattr(obj, h, None)) and not hasattr(hookspecs, h)]
        if unknown:  # a misspelled hook would otherwise be ignored silently
            pm.unregister(obj)
            known = [h for h in dir(hookspecs) if h.startswith("flowrt_")]
            info.status = "failed"
            info.error = (f"unknown hook {unknown[0]!r}.{_did_you_mean(unknown[0], known)} "
                          f"Known hooks: {', '.join(known)}")

    @property
    def failed_plugins(self) -> list[PluginInfo]:
        """The plugins that failed to load (an import error, a hook that raised), and
        those with parts the runtime left out (:attr:`PluginInfo.notes`)."""
        return [p for p in self.plugins.values() if p.status == "failed" or p.notes]

    def _failures_text(self) -> str:
        bad = [p for p in self._infos.values() if p.status == "failed"]
        text = " Plugins that failed to load: " + "; ".join(
            f"{p.name} ({p.error})" for p in bad) + "." if bad else ""
        notes = [f"{p.name}: {n}" for p in self._infos.values() for n in p.notes]
        if notes:
            text += " Left out: " + "; ".join(notes) + "."
        return text

    def placement_notes(self, device_type: str | None = None) -> str:
        """What a placement error adds so that a user sees why a device is missing:
        ``"; plugin 'x' failed to load: <error>"`` for each failed plugin, and
        ``"; device type GPU unavailable: <reason>"`` for ``device_type`` (every type
        with a reason when None) that found no devices; ``""`` when there is nothing
        to say. Never raises: a registry that cannot be built says so."""
        parts = [f"plugin {p.name!r} failed to load: {p.error}"
                 for p in self._infos.values() if p.status == "failed"]
        try:
            types = self.device_types
        except Exception as e:  # noqa: BLE001 - a conflict: said instead of the reasons
            types = {}
            parts.append(f"the device types cannot be merged: {e}")
        want = canonical_type(device_type) if device_type else None
        if want is not None and want not in types:
            parts.append(f"no device type {want!r} is registered (known: {sorted(types)})")
        for name, dt in sorted(types.items()):
            if dt.unavailable_reason and (want is None or name == want):
                parts.append(f"device type {name} unavailable: {dt.unavailable_reason}")
        return "".join(f"; {p}" for p in parts)

    def _call(self, hook: str) -> list[tuple[str, Any]]:
        """Call a hook once; return [(plugin name, result)] in registration order."""
        pm = self.pm
        out: list[tuple[str, Any]] = []
        for impl in getattr(pm.hook, hook).get_hookimpls():
            try:
                res = impl.function()
            except Exception as e:
                info = self._infos.get(impl.plugin_name)
                if info is not None:
                    info.status, info.error = "failed", f"{hook}: {type(e).__name__}: {e}"
                continue
            if res is None:
                continue
            out.append((impl.plugin_name, res))
        return out

    def _merge(self, hook: str, key: str, what: str, provides: str) -> dict[str, Any]:
        """Merge the objects every plugin returns from ``hook`` by their ``key``
        attribute; a key claimed twice raises, naming both plugins."""
        reg: dict[str, Any] = {}
        for pname, lst in self._call(hook):
            for obj in lst:
                k = getattr(obj, key)
                if k in reg:
                    raise PluginError(f"{what} {k!r} is registered by two plugins: "
                                      f"{reg[k].plugin!r} and {pname!r}")
                obj.plugin = pname
                reg[k] = obj
                self.plugins[pname].provides.setdefault(provides, []).append(k)
        return reg

    # -- device types -----------------------------------------------------------------
    @property
    def device_types(self) -> dict[str, Any]:
        """``{type name: DeviceType}`` merged from every plugin."""
        if self._device_types is None:
            with self._lock:
                if self._device_types is None:
                    self._device_types = self._merge("flowrt_device_types", "name",
                                                     "device type", "device types")
        return self._device_types

    def device_type(self, name: str) -> Any:
        """The DeviceType called ``name``; NotFoundError with what exists otherwise."""

        n = canonical_type(name)
        dt = self.device_types.get(n)
        if dt is None:
            raise NotFoundError(None, None,
                                f"No device type {n!r} is registered. Known device types: "
                                f"{sorted(self.device_types)}.{_did_you_mean(n, self.device_types)}"
                                f"{self._failures_text()}")
        return dt

    # -- transports -------------------------------------------------------------------
    @property
    def transports(self) -> dict[str, Any]:
        """``{scheme: Transport}`` merged from every plugin."""
        if self._transports is None:
            with self._lock:
                if self._transports is None:
                    reg = self._merge("flowrt_transports", "scheme",
                                      "transport scheme", "transports")
                    for t in reg.values():
                        t.runtime = self
                    self._transports = reg
        return self._transports

    def transport(self, scheme: str) -> Any:
        """The transport of ``scheme``, ready to use: a transport its plugin declared
        as a :class:`~flowrt.plugin.transport.DeferredTransport` is imported now (the
        :attr:`transports` table lists it without importing it).

        :raises NotFoundError: naming the scheme, the known ones and the plugins that
            failed to load
        """
        t = self.transports.get(scheme)
        if t is None:
            raise NotFoundError(None, None,
                                f"No transport for scheme {scheme!r}. Known schemes: "
                                f"{sorted(self.transports)}.{_did_you_mean(scheme, self.transports)}"
                                f"{self._failures_text()}")
        return t.load() if isinstance(t, DeferredTransport) else t

    # -- ops, kernels, gradients, API ---------------------------------------------------
    def _build_ops(self) -> None:
        """Merge every plugin's kernel sets into the op, kernel, gradient and API tables
        (once) and record what each plugin provides. A kernel for an op that no plugin
        defines is dropped when some plugin was blocked or failed to load.

        :raises PluginError: when two plugins define the same op, kernel (op and device
            type), gradient or API name, or when a kernel's op is defined by no plugin
            and none was blocked or failed.
        """
        with self._lock:
            if self._ops is not None:
                return
            ops: dict[str, Any] = {}
            kernels: dict[tuple[str, str], Any] = {}
            grads: dict[str, Any] = {}
            api: dict[str, Any] = {}
            api_owner: dict[str, str] = {}
            grad_owner: dict[str, str] = {}
            for pname, sets in self._call("flowrt_kernel_sets"):
                self._kernel_set_plugins.add(pname)
                for ks in sets:
                    prov = self.plugins[pname].provides
                    for name, d in ks.ops.items():
                        if name in ops:
                            raise PluginError(f"op {name!r} is defined by two plugins: "
                                              f"{ops[name].plugin!r} and {pname!r}")
                        d.plugin = pname
                        ops[name] = d
                    if ks.ops:
                        prov.setdefault("ops", []).extend(ks.ops)
                    foreign: dict[str, int] = {}  # kernels for ops other plugins define
                    for k in ks.kernels:
                        if k.op not in ks.ops:
                            foreign[k.device_type] = foreign.get(k.device_type, 0) + 1
                    if foreign:
                        prov.setdefault("kernels", []).extend(
                            f"{t} ({n})" for t, n in sorted(foreign.items()))
                    for k in ks.kernels:
                        key = (k.op, k.device_type)
                        if key in kernels:
                            raise PluginError(f"kernel for op {k.op!r} on device type "
                                              f"{k.device_type!r} is registered by two "
                                              f"plugins: {kernels[key].plugin!r} and {pname!r}")
                        k.plugin = pname
                        kernels[key] = k
                    for op, fn in ks.gradients.items():
                        if op in grads and grad_owner[op] != pname:
                            raise PluginError(f"gradient for op {op!r} is registered by two "
                                              f"plugins: {grad_owner[op]!r} and {pname!r}")
                        grads[op] = fn
                        grad_owner[op] = pname
                    for n, fn in ks.api_names.items():
                        if n in api and api_owner[n] != pname:
                            raise PluginError(f"API name {n!r} is exported by two plugins: "
                                              f"{api_owner[n]!r} and {pname!r}")
                        api[n] = fn
                        api_owner[n] = pname
            # A kernel for an op no plugin defines is a plugin's bug, unless a plugin
            # that may define it was blocked or failed: then the kernel has nothing to
            # run and is left out (a GPU kernel set without the standard one), noted on
            # its plugin, so that the failure stays with the plugin that failed instead
            # of breaking every graph.
            absent = sorted(f"{p.name} ({p.status})" for p in self._infos.values()
                            if p.status in ("blocked", "failed"))
            for (op, dt), k in list(kernels.items()):
                if op not in ops:
                    if absent:
                        del kernels[(op, dt)]
                        self._infos[k.plugin].notes.append(
                            f"kernel for op {op!r} on {dt} dropped: no loaded plugin "
                            f"defines the op (not loaded: {', '.join(absent)})")
                        continue
                    off = [f"{p.name} ({p.error})" for p in self._infos.values()
                           if p.status == "disabled"]
                    raise PluginError(f"plugin {k.plugin!r} registers a kernel for op {op!r}, "
                                      "which no plugin defines" + (
                                          f" (plugins not loaded: {'; '.join(off)})"
                                          if off else ""))
            self._kernels, self._gradients, self._api = kernels, grads, api
            self._ops = ops

    @property
    def op_defs(self) -> dict[str, Any]:
        """``{op type: OpDef}``."""
        if self._ops is None:
            self._build_ops()
        return self._ops  # type: ignore[return-value]

    def op_def(self, op_type: str) -> Any:
        """The OpDef of ``op_type``; ValueError naming what exists otherwise (build time)."""
        ops = self.op_defs
        d = ops.get(op_type)
        if d is None:
            raise ValueError(f"Op type not registered '{op_type}'.{_did_you_mean(op_type, ops)}"
                             f"{self._failures_text()}")
        return d

    @property
    def kernels(self) -> dict[tuple[str, str], Any]:
        """``{(op type, device type or '*'): KernelDef}``."""
        if self._ops is None:
            self._build_ops()
        return self._kernels

    def find_kernel(self, op_type: str, device_type: str,
                    attrs: dict[str, Any] | None = None) -> Any | None:
        """The kernel for ``op_type`` on ``device_type``: a specific one, else the
        generic array-module one if that device type runs them; None if neither. With
        ``attrs``, a kernel whose ``supports(attrs)`` is false does not count."""
        ks = self.kernels
        k = ks.get((op_type, device_type))
        if k is not None:  # the device type's own kernel decides: no fallback to "*"
            return k if attrs is None or k.supports is None or self._supports(k, attrs) \
                else None
        k = ks.get((op_type, "*"))
        if k is not None:
            dt = self.device_types.get(device_type)
            if (dt is None or dt.array_kernels or k.all_devices) and \
                    (attrs is None or k.supports is None or self._supports(k, attrs)):
                return k
        return None

    def _supports(self, k: Any, attrs: dict[str, Any]) -> bool:
        """``k.supports(attrs)``; a predicate that raises counts as "no" for that node
        (noted on its plugin once), so that one plugin's bug does not stop placement
        of every graph."""
        try:
            return bool(k.supports(attrs))
        except Exception as e:  # noqa: BLE001 - contained and reported, see above
            info = self._infos.get(k.plugin or "")
            note = (f"supports() of the kernel for op {k.op!r} on {k.device_type} raised "
                    f"{type(e).__name__}: {e}; the kernel is not used for such nodes")
            if info is not None and note not in info.notes:
                info.notes.append(note)
            return False

    def kernel_device_types(self, op_type: str,
                            attrs: dict[str, Any] | None = None) -> list[str]:
        """Device types that have a kernel for ``op_type`` (supporting ``attrs``)."""
        types = [dt for dt in self.device_types
                 if self.find_kernel(op_type, dt, attrs) is not None]
        return sorted(types)

    @property
    def gradients(self) -> dict[str, Any]:
        if self._ops is None:
            self._build_ops()
        return self._gradients

    @property
    def api(self) -> dict[str, Any]:
        """``{public name: object}`` exported by kernel sets (``"nn.relu"`` ...)."""
        if self._ops is None:
            self._build_ops()
        return self._api

    def api_function(self, name: str) -> Any:
        """The API function ``name`` a kernel set exports (``"nn.relu"`` ...).

        :raises AttributeError: naming it, with "did you mean", and, for a name the
            core needs (:func:`require_api`), saying that no loaded plugin provides it
        """
        fn = self.api.get(name)
        if fn is None:
            need = (" The core needs it: a kernel set providing it (the standard plugin) "
                    "is blocked or failed to load." if name in _required_api else "")
            raise AttributeError(f"flowrt has no API function {name!r}"
                                 f"{self.missing_api_note(name)}.{need}"
                                 f"{_did_you_mean(name, self._api)}")
        return fn

    def missing_api_note(self, name: str) -> str:
        """Why API name ``name`` may be missing, for an ``AttributeError``: the plugins
        that failed to load before exporting their kernel sets, one of which may
        provide it (``" (the plugin 'bar' that may provide it failed to load:
        ImportError: ...)"``), or ``""`` when none failed."""
        self.api  # noqa: B018 - builds the tables: a hook failure is recorded first
        bad = [p for p in self._infos.values() if p.status == "failed"
               and p.name not in self._kernel_set_plugins]
        if not bad:
            return ""
        if len(bad) == 1:
            return (f" (the plugin {bad[0].name!r} that may provide it failed to load: "
                    f"{bad[0].error})")
        return (" (plugins that may provide it failed to load: " +
                "; ".join(f"{p.name!r}: {p.error}" for p in bad) + ")")

    def missing_required_api(self) -> list[str]:
        """The op API names the core needs (:func:`require_api`) that no loaded kernel
        set provides: empty with the standard plugin loaded. Computed when the API table
        is built; ``flowrt plugins`` prints them."""
        return sorted(_required_api - set(self.api))

    # -- passes -----------------------------------------------------------------------
    @property
    def graph_passes(self) -> list[Any]:
        """Graph passes in ascending ``order``."""
        if self._passes is None:
            with self._lock:
                if self._passes is None:
                    reg = self._merge("flowrt_graph_passes", "name", "graph pass",
                                      "graph passes")
                    self._passes = sorted(reg.values(), key=lambda p: (p.order, p.name))
        return self._passes

    def describe(self) -> list[PluginInfo]:
        """Load everything and return the plugin table (``flowrt plugins``)."""
        _ = self.pm
        for reg in ("device_types", "transports", "op_defs", "graph_passes"):
            try:
                getattr(self, reg)
            except Exception as e:  # a conflict is reported, not fatal, here
                self.plugins.setdefault("<runtime>", PluginInfo("<runtime>", "")).error = str(e)
        for dt in self.device_types.values():
            if dt.unavailable_reason is None:
                try:
                    dt.discover(None, "localhost", 0)
                except Exception as e:
                    dt.unavailable_reason = f"{type(e).__name__}: {e}"
        return list(self.plugins.values())


_default: list[Runtime | None] = [None]
_default_lock = threading.Lock()


def default_runtime() -> Runtime:
    """The process-wide runtime, created on first use."""
    r = _default[0]
    if r is None:
        with _default_lock:
            r = _default[0]
            if r is None:
                r = _default[0] = Runtime()
    return r


def set_default_runtime(runtime: Runtime | None) -> None:
    """Replace the process-wide runtime (None: build a fresh one on next use)."""
    _default[0] = runtime


# -- the client's graphs, as the service layer receives them -----------------------------
_graph_importer: list[Callable[[Runtime, Any], Any]] = []


def set_graph_importer(fn: Callable[["Runtime", Any], Any]) -> None:
    """Install how a master turns a client's ``GraphDef`` into the graph it compiles:
    ``fn(runtime, graph_def) -> graph``, raising ``ValueError``/``TypeError``/``KeyError``
    for a bad one. The service layer never imports the framework layer's ``Graph``; the
    framework installs this when it is imported (``import flowrt`` does), so every
    process that can run a master has it."""
    _graph_importer[:] = [fn]


def import_client_graph(runtime: "Runtime", graph_def: Any) -> Any:
    """The graph a master compiles for a client that sent ``graph_def``."""
    if not _graph_importer:
        raise RuntimeError("no graph importer: import flowrt (its framework layer "
                           "installs one) before starting a master")
    return _graph_importer[0](runtime, graph_def)


_required_api: set[str] = set()


def require_api(names: Iterable[str]) -> None:
    """Declare op API names that layers above the plugin layer call by name
    (``flowrt.graph.REQUIRED_API_NAMES``). Each runtime reports those that no loaded
    kernel set provides (:meth:`Runtime.missing_required_api`)."""
    _required_api.update(names)
