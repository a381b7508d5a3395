"""Meta-tests keeping the hooks, the plugin author's guide and the tests in step.

- every hook declared in core/plugin/hookspecs.py has a heading in docs/plugins.md that is its
  exact signature, and is exercised by some test under tests/;
- every Python example in docs/plugins.md runs as written;
- the guide and flowrt.testing cover what the core defines (kernel kinds, PluginInfo
  fields, the conformance checks).
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import flowrt.hookspecs
import flowrt.testing
from flowrt.op_registry import KernelDef
from flowrt.runtime import PluginInfo

ROOT = Path(__file__).resolve().parent.parent
HOOKSPECS = ROOT / "core" / "plugin" / "hookspecs.py"
GUIDE = ROOT / "docs" / "plugins.md"
TESTS = ROOT / "tests"


def _unquote(annotation: str) -> str:
    """``'list[X]'`` (a string annotation) -> ``list[X]``."""
    a = annotation.strip()
    if len(a) >= 2 and a[0] == a[-1] and a[0] in "'\"":
        return a[1:-1]
    return a


def hook_signatures() -> dict[str, str]:
    """``{hook name: "name(args) -> return"}`` for every ``@hookspec`` function."""
    tree = ast.parse(HOOKSPECS.read_text())
    out: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        names = [d.func if isinstance(d, ast.Call) else d for d in node.decorator_list]
        if not any(isinstance(n, ast.Name) and n.id == "hookspec" for n in names):
            continue
        args = ast.unparse(node.args)
        args = re.sub(r"'([^']*)'|\"([^\"]*)\"", lambda m: m.group(1) or m.group(2), args)
        ret = _unquote(ast.unparse(node.returns)) if node.returns is not None else "None"
        out[node.name] = f"{node.name}({args}) -> {ret}"
    return out


def guide_headings() -> list[str]:
    prose = re.sub(r"^```.*?^```", "", GUIDE.read_text(), flags=re.M | re.S)
    return [re.sub(r"[`*]", "", m.group(1)).strip()
            for m in re.finditer(r"^#{1,6}[ \t]+([^\n]*?)[ \t#]*$", prose, re.M)]


def python_blocks() -> list[tuple[str, str]]:
    """``[(id, code)]`` for every ```python block, named after the heading above it."""
    text = GUIDE.read_text()
    blocks: list[tuple[str, str]] = []
    heading = "top"
    pos = 0
    for m in re.finditer(r"^(#{1,6}[ \t][^\n]*)$|^```python\n(.*?)^```", text, re.M | re.S):
        if m.group(1):
            heading = re.sub(r"[^a-z0-9]+", "-", m.group(1).lower()).strip("-")[:40]
            pos = 0
        else:
            pos += 1
            blocks.append((f"{heading}-{pos}", m.group(2)))
    return blocks


def test_hookspecs_are_found() -> None:
    sigs = hook_signatures()
    declared = {n for n in dir(flowrt.hookspecs)
                if hasattr(getattr(flowrt.hookspecs, n), "flowrt_spec")}
    assert set(sigs) == declared
    assert {"flowrt_device_types", "flowrt_transports", "flowrt_kernel_sets",
            "flowrt_graph_passes"} <= declared


@pytest.mark.parametrize("hook", sorted(hook_signatures()))
def test_every_hook_is_documented_under_its_signature(hook: str) -> None:
    sig = hook_signatures()[hook]
    assert sig in guide_headings(), (
        f"docs/plugins.md needs a heading that is exactly `{sig}`")


def test_guide_documents_no_stale_hooks() -> None:
    sigs = set(hook_signatures().values())
    stale = [h for h in guide_headings() if h.startswith("flowrt_") and h not in sigs]
    assert not stale


@pytest.mark.parametrize("hook", sorted(hook_signatures()))
def test_every_hook_has_a_test(hook: str) -> None:
    users = [p.name for p in sorted(TESTS.glob("test_*.py"))
             if p.name != Path(__file__).name and hook in p.read_text()]
    assert users, f"no test under tests/ mentions the hook {hook}"


@pytest.mark.parametrize("code", [c for _, c in python_blocks()],
                         ids=[i for i, _ in python_blocks()])
def test_guide_examples_run(code: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWRT_")}
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]


def test_guide_has_examples_for_each_plugin_kind() -> None:
    text = "\n".join(c for _, c in python_blocks())
    for needle in ("DeviceType(", "Transport)", "KernelSet(", "GraphPass(",
                   'kind="step"', 'kind="async"', 'kind="const"', "@ks.gradient",
                   "@ks.api", "flowrt.testing.check_plugin", "tf.Runtime("):
        assert needle in text, needle


def test_kernel_kinds_are_documented_and_checked() -> None:
    kinds = re.findall(r'^\s*- ``"(\w+)"``:', KernelDef.__doc__ or "", re.M)
    assert {"plain", "step", "async"} <= set(kinds)
    assert set(kinds) == set(flowrt.testing.KERNEL_KINDS), (
        "flowrt.testing.KERNEL_KINDS must list every kind KernelDef documents")
    text = GUIDE.read_text()
    for k in kinds:
        assert f'| `"{k}"` |' in text


def test_plugin_info_fields_and_checks_are_documented() -> None:
    text = GUIDE.read_text()
    for f in PluginInfo.__dataclass_fields__:
        assert f"`{f}`" in text, f
    for status in ("loaded", "failed", "blocked", "disabled"):
        assert f"`{status}`" in text
    for name in flowrt.testing.__all__:
        if name.startswith("check_"):
            assert f"`{name}(" in text, name
    for env in ("FLOWRT_DISABLE_PLUGIN_AUTOLOAD", "FLOWRT_BLOCK_PLUGINS",
                "FLOWRT_DISABLE_PASSES"):
        assert env in text
