"""The layers of core/ and the rules that keep them (docs/architecture.md).

core/ is split into layer packages, lowest first::

    base -> plugin -> engine -> service -> distributed -> framework -> training
        -> inputs -> modeling -> tools

A module may import its own layer and the layers below it, never one above, at module
level or inside a function; the core never imports ``flowrt.plugins``; plugins import
only public names of the core. The test prints a line budget per package (as
tinygrad's ``sz.py`` does) and fails when a package outgrows it.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORE = ROOT / "core"
PLUGINS = ROOT / "plugins"

#: lowest first; the generated protobuf modules sit with base
LAYERS = ["base", "plugin", "engine", "service", "distributed", "framework", "training",
          "inputs", "modeling", "tools"]
RANK = {name: i for i, name in enumerate(LAYERS)}
RANK["proto"] = 0
#: core/'s own top-level modules (the package's face) may import any layer
TOP = len(LAYERS)

#: lines of code (not blank, not comment-only) each layer may hold: room to grow, but a
#: package that doubles should be split, not stretched
BUDGET = {"base": 2000, "plugin": 2600, "engine": 4200, "service": 2600,
          "distributed": 3200, "framework": 5200, "training": 6000, "inputs": 4000,
          "modeling": 9000, "tools": 6000}


def _modules(root: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in root.rglob("*.py") if "proto" not in p.relative_to(root).parts)


def _layer_of(path: pathlib.Path) -> int:
    rel = path.relative_to(CORE).parts
    return RANK[rel[0]] if len(rel) > 1 else TOP


def _package_of(path: pathlib.Path) -> list[str]:
    """``flowrt.engine.executor`` -> ``["flowrt", "engine"]`` (for relative imports)."""
    parts = ["flowrt", *path.relative_to(CORE).parts]
    parts[-1] = parts[-1][:-3]
    return parts[:-1] if parts[-1] != "__init__" else parts[:-1]


def _imports(path: pathlib.Path, old_paths: bool = False
             ) -> list[tuple[int, str, list[str], bool]]:
    """(line, absolute module, imported names, inside a function) for each import;
    without ``old_paths``, leaving out those in a module-level ``__getattr__`` (the one
    place a lower layer may name a higher one: to keep an old import path working)."""
    tree = ast.parse(path.read_text(), str(path))
    inner: set[int] = set()
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner.update(id(n) for n in ast.walk(node) if n is not node)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__" and not old_paths:
            skipped.update(id(n) for n in ast.walk(node))
    out = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                out.append((node.lineno, a.name, [], id(node) in inner))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                pkg = _package_of(path) if path.is_relative_to(CORE) else []
                base = pkg[:len(pkg) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            names = [a.name for a in node.names]
            out.append((node.lineno, mod, names, id(node) in inner))
    return out


def _target_rank(mod: str, names: list[str]) -> list[tuple[str, int]]:
    """The layers an import of ``mod`` (``from mod import names``) reaches."""
    parts = mod.split(".")
    if parts[0] != "flowrt" or (len(parts) > 1 and parts[1] == "plugins"):
        return []
    if len(parts) > 1:
        if parts[1] in RANK:
            return [(mod, RANK[parts[1]])]
        if parts[1].startswith("_") or parts[1] == "__main__":
            return [(mod, TOP)]
        return [(mod, -1)]  # an old path (flowrt.graph): see the test below
    out = []
    for n in names:
        if n in RANK:
            out.append((f"flowrt.{n}", RANK[n]))
        elif n.startswith("_"):
            out.append((f"flowrt.{n}", TOP))
    return out


def test_imports_go_down_the_layers() -> None:
    bad = []
    for path in _modules(CORE):
        own = _layer_of(path)
        for line, mod, names, _inner in _imports(path):
            for target, rank in _target_rank(mod, names):
                where = f"{path.relative_to(ROOT)}:{line}"
                if rank < 0:
                    bad.append(f"{where} imports {target} by its old path (use the layer "
                               "package's module)")
                elif rank > own and own != TOP:
                    bad.append(f"{where} ({LAYERS[own]}) imports {target} "
                               f"({LAYERS[rank] if rank < TOP else 'the package root'}), "
                               "a layer above it")
    assert not bad, "\n".join(bad)


def test_the_core_never_imports_a_plugin() -> None:
    bad = [f"{p.relative_to(ROOT)}:{line} imports {mod}"
           for p in _modules(CORE) for line, mod, _n, _i in _imports(p)
           if mod.startswith("flowrt.plugins")]
    assert not bad, "\n".join(bad)


def test_plugins_use_only_public_names_of_the_core() -> None:
    bad = []
    for path in _modules(PLUGINS):
        for line, mod, names, _inner in _imports(path):
            parts = mod.split(".")
            if parts[0] != "flowrt" or (len(parts) > 1 and parts[1] == "plugins"):
                continue
            private = [p for p in parts[1:] if p.startswith("_")]
            private += [n for n in names if n.startswith("_")]
            if private:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {', '.join(private)} "
                           f"from {mod}")
    assert not bad, "\n".join(bad)


def _code_lines(path: pathlib.Path) -> int:
    return sum(1 for ln in path.read_text().splitlines()
               if ln.strip() and not ln.strip().startswith("#"))


def test_line_budget_per_layer(capsys: pytest.CaptureFixture[str]) -> None:
    sizes = {name: sum(_code_lines(p) for p in _modules(CORE / name)) for name in LAYERS}
    with capsys.disabled():
        print("\ncore/ lines of code per layer (budget):")
        for name in LAYERS:
            print(f"  {name:<12} {sizes[name]:>6} ({BUDGET[name]})")
    over = {n: s for n, s in sizes.items() if s > BUDGET[n]}
    assert not over, f"layers over their line budget: {over}"


def test_every_core_module_is_in_a_layer() -> None:
    """core/ holds the layer packages, the generated protos and the package's face."""
    loose = sorted(p.name for p in CORE.glob("*.py")
                   if p.name not in ("__init__.py", "__main__.py", "_paths.py"))
    assert not loose, f"modules outside the layer packages: {loose}"
    dirs = sorted(p.name for p in CORE.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert dirs == sorted([*LAYERS, "proto"])


def test_old_import_paths_are_the_same_modules() -> None:
    import importlib

    import flowrt
    from flowrt import _paths

    for old, new in _paths.MOVED.items():
        assert importlib.import_module(f"flowrt.{old}") is \
            importlib.import_module(f"flowrt.{new}"), old
    assert callable(flowrt.device) and callable(flowrt.gradients)  # functions, not modules


def test_upward_names_are_only_old_paths() -> None:
    """A module-level ``__getattr__`` that imports from a higher layer exists only to
    keep an old import path working; each is listed here."""
    found = set()
    for path in _modules(CORE):
        own = _layer_of(path)
        for _line, mod, names, _inner in _imports(path, old_paths=True):
            for target, rank in _target_rank(mod, names):
                if 0 <= own < rank < TOP:
                    found.add((str(path.relative_to(CORE)), target))
    assert found == {("plugin/transport.py", "flowrt.distributed.message_transport")}


def test_the_core_calls_only_declared_op_api_names() -> None:
    """Every op API name the core calls by name is declared in REQUIRED_API_NAMES (which
    the runtime checks), and the standard plugin provides them all."""
    import importlib

    import flowrt
    from flowrt.framework.graph import REQUIRED_API_NAMES

    declared = set(REQUIRED_API_NAMES)
    for layer in ("training", "inputs", "modeling", "tools"):
        for path in _modules(CORE / layer):
            mod = importlib.import_module(".".join(_package_of(path) + [path.stem])
                                          if path.stem != "__init__" else f"flowrt.{layer}")
            declared |= set(getattr(mod, "REQUIRED_API_NAMES", ()))
    called = set()
    for path in _modules(CORE):
        for node in ast.walk(ast.parse(path.read_text())):
            # api_function("x"), or a module's own shorthand for it, _op("x")
            if isinstance(node, ast.Call) and \
                    getattr(node.func, "id", None) in ("api_function", "_op") \
                    and node.args and isinstance(node.args[0], ast.Constant):
                called.add(node.args[0].value)
    assert called <= declared, sorted(called - declared)
    assert flowrt.default_runtime().missing_required_api() == []
    blocked = flowrt.Runtime(block=["standard"])
    assert set(blocked.missing_required_api()) == declared
    with pytest.raises(AttributeError, match="'reshape'. The core needs it"):
        blocked.api_function("reshape")


def test_long_functions_say_what_they_do() -> None:
    """Every function of 20 lines or more in core/ has a docstring (nested ones too)."""
    bare = []
    for path in _modules(CORE):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    (node.end_lineno or node.lineno) - node.lineno + 1 >= 20 and \
                    ast.get_docstring(node) is None:
                bare.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not bare, "\n".join(bare)


def test_imports_inside_functions_say_why() -> None:
    """An import inside a function (other than a module's ``__getattr__``) is the
    exception: an optional library, a module that ``import flowrt`` must not load yet,
    or a cycle between two modules of one layer. Each says which in a comment on its
    line or the line above; every other import is at module level."""
    bare = []
    for path in _modules(CORE):
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines), str(path))
        seen: set[int] = set()
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
                    fn.name == "__getattr__":
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and \
                        node.lineno not in seen:
                    seen.add(node.lineno)
                    here = lines[node.lineno - 1]
                    above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
                    if "#" not in here and not above.startswith("#"):
                        bare.append(f"{path.relative_to(ROOT)}:{node.lineno} {here.strip()}")
    assert not bare, "in-function imports without a reason:\n" + "\n".join(bare)
