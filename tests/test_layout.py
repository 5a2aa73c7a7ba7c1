"""The shape of the house: no import cycle between the project's modules (function-level imports
count: a cycle broken only by a late import is still a cycle), no module over 400 lines, and no
module importing another module's private names."""
import ast
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = ("dispatcher", "tuner", "api")
MAX_LINES = 400


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            parts = f.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[tuple[str, tuple[str, ...]]]:
    """(module imported, names taken from it) for every import statement anywhere in the file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {(a.name, ()) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for a in node.names:                        # `from pkg import submodule` imports the submodule
                sub = f"{base}.{a.name}"
                found.add((sub, ()) if sub in known else (base, (a.name,)))
    return {(m, names) for m, names in found if m in known}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {m: {dep for dep, _ in imports(m, f, known) if dep != m} for m, f in known.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_between_the_projects_modules():
    g = graph()
    assert g["tuner.sweep"] and g["api.main"]          # the graph sees relative and absolute imports
    assert cycles(g) == []


def test_the_checker_finds_a_cycle_made_of_a_late_import():
    g = graph()
    g["dispatcher.problem"] = g["dispatcher.problem"] | {"dispatcher.dispatch"}   # as a function-level import would
    assert any("dispatcher.problem" in c and "dispatcher.dispatch" in c for c in cycles(g))


def test_no_module_over_400_lines():
    long = {m: n for m, f in modules().items() if (n := len(f.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_no_module_takes_another_modules_private_names():
    known = modules()
    private = {(m, dep, n) for m, f in known.items() for dep, names in imports(m, f, known)
               for n in names if n.startswith("_") and not n.startswith("__") and dep != m}
    assert private == set()
