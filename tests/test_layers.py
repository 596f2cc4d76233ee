"""The layer borders of DEVELOPERS.md, enforced.

import-linter checks the package-level contracts in pyproject.toml (Qt only in gui, HTTP client
libraries only in devmon_sync.client, DuckDB only in devmon_sync.store, analysis pure).  What it
cannot express is checked here by reading every module's import statements and string literals.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("devmon_sync", "analysis", "gui")
# The modules that start the reference server: `devmon serve` and the demo (CLI and app).
SERVER_STARTERS = ("devmon_sync.cli", "devmon_sync.cli.serve", "devmon_sync.demo")
# SELECT must reach a FROM (or be a bare expression list), so that a docstring beginning
# "Select (and reveal) a row" is not taken for a query.
SQL = re.compile(r"^\s*(SELECT\b.*\bFROM\b|SELECT\s+[\w(),*.+-]+(\s*,\s*[\w(),*.+-]+)*\s*$|INSERT\s+INTO\b|CREATE\s+(TABLE|VIEW|INDEX)\b|DELETE\s+FROM\b"
                 r"|UPDATE\s+\w+\s+SET\b|MERGE\s+INTO\b|ALTER\s+TABLE\b|DROP\s+TABLE\b)",
                 re.IGNORECASE | re.DOTALL)


def _modules():
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            yield name.removesuffix(".__init__"), ast.parse(path.read_text(), str(path))


def _imports(tree: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def test_import_linter_contracts_hold():
    result = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import "
                             "lint_imports_command; sys.exit(lint_imports_command())"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "broken" in result.stdout and " 0 broken" in result.stdout


def test_reference_server_shares_nothing_with_the_client_side():
    allowed = ("devmon_sync.server", "devmon_sync.api_contract")
    for name, tree in _modules():
        if not name.startswith("devmon_sync.server"):
            continue
        own = {m for m in _imports(tree) if m.split(".")[0] in PACKAGES}
        bad = sorted(m for m in own if not m.startswith(allowed)
                     and m not in ("devmon_sync", "devmon_sync.__version__"))
        assert not bad, f"{name} imports {bad}: the server may only use its own modules and " \
                        f"devmon_sync.api_contract"


def test_client_side_never_imports_the_server():
    for name, tree in _modules():
        if name.startswith("devmon_sync.server") or name in SERVER_STARTERS:
            continue  # `devmon serve` and the demo (CLI and app) start the server
        bad = sorted(m for m in _imports(tree) if m.startswith("devmon_sync.server"))
        assert not bad, f"{name} imports the reference server ({bad})"


def test_the_client_side_reads_the_servers_choices_only_as_the_profiles_defaults():
    """api_contract is the reference server's choices; the client knows a service through its
    learned profile (``service_profile``), which takes those choices as defaults only."""
    allowed = ("devmon_sync.server", "devmon_sync.api_contract", "devmon_sync.service_profile")
    for name, tree in _modules():
        if name.startswith(allowed) or name in SERVER_STARTERS:
            continue
        bad = sorted(m for m in _imports(tree) if m.startswith("devmon_sync.api_contract"))
        assert not bad, f"{name} reads api_contract ({bad}): read service_profile instead"


def test_no_pyplot_and_no_qt_backend_outside_gui():
    for name, tree in _modules():
        imports = _imports(tree)
        assert "matplotlib.pyplot" not in imports, f"{name} uses pyplot: build Figure objects"
        if not name.startswith("gui"):
            qt = sorted(m for m in imports if "backend_qt" in m or m.startswith("PySide6"))
            assert not qt, f"{name} imports Qt ({qt}); Qt belongs in gui/"


def test_sql_text_only_in_the_store():
    for name, tree in _modules():
        if name.startswith("devmon_sync.store"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not SQL.match(node.value), f"SQL text in {name}: {node.value[:60]!r}"


def test_the_checks_see_a_crossing(tmp_path):
    """The reading-based checks must be able to fail: a Qt import in analysis is seen."""
    tree = ast.parse("from PySide6.QtWidgets import QWidget\nx = 'SELECT * FROM readings'\n")
    assert "PySide6.QtWidgets" in _imports(tree)
    assert any(isinstance(n, ast.Constant) and isinstance(n.value, str) and SQL.match(n.value)
               for n in ast.walk(tree))


def test_duckdb_only_in_the_store_and_http_only_in_the_client_in_every_module():
    """Every module, new ones included (the import-linter contracts list modules by name)."""
    for name, tree in _modules():
        top = {m.split(".")[0] for m in _imports(tree)}
        if not name.startswith("devmon_sync.store"):
            assert "duckdb" not in top, f"{name} imports duckdb: go through devmon_sync.store"
        if name != "devmon_sync.client" and not name.startswith("devmon_sync.client."):
            bad = top & {"requests", "urllib3", "httpx"}
            assert not bad, f"{name} imports {bad}: HTTP belongs in devmon_sync.client"


def _module_graph() -> dict[str, set[str]]:
    """Which of our modules each module imports (lazy imports inside functions included, those
    for type checkers only not): ``from pkg import name`` counts as importing ``pkg.name``
    when that is a module."""
    trees = dict(_modules())
    graph = {}
    for name, tree in trees.items():
        targets = set()
        typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                       and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
                       for n in ast.walk(block)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    targets.add(sub if sub in trees else node.module)
        graph[name] = {t for t in targets if t in trees and t != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    """A module never imports (even lazily) one that imports it back: the tree reads top down."""
    assert _circles(_module_graph()) == []


def test_the_circle_check_sees_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


LONG_MODULE_LINES = 600


def test_a_long_module_says_why_it_is_one_module():
    """A module over 600 lines says in its docstring why it is not split (``Size: ...``):
    past that length a newcomer should find the reason, not guess it."""
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            text = path.read_text()
            if text.count("\n") <= LONG_MODULE_LINES:
                continue
            doc = ast.get_docstring(ast.parse(text)) or ""
            assert "Size:" in doc, f"{path.relative_to(ROOT)} has {text.count(chr(10))} lines " \
                                   f"and no 'Size:' sentence in its docstring saying why"
