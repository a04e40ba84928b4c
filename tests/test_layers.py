"""The package's layers point one way: the commands (fairseq_ctemp/cli/) are thin over the package,
and nothing outside cli/ imports from it (docs/design.md, "Package map")."""

import ast
import os

from conftest import PLUGIN_DIR, REPO


def imported_modules(path, package):
    """The absolute names of the modules a file imports (relative imports resolved)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)


def test_nothing_outside_cli_imports_from_cli():
    offenders = []
    for directory, _, files in os.walk(PLUGIN_DIR):
        relative = os.path.relpath(directory, os.path.dirname(PLUGIN_DIR))
        package = relative.replace(os.sep, ".")
        if package.split(".")[:2] == ["fairseq_ctemp", "cli"]:
            continue
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                offenders += [
                    f"{os.path.relpath(path, PLUGIN_DIR)} imports {module}"
                    for module in imported_modules(path, package)
                    if module.startswith("fairseq_ctemp.cli")
                ]
    assert not offenders, "\n".join(offenders)


MAX_LINES = 75  # a screen; the longest now: an argparse parser of a benchmark


def test_functions_fit_on_a_screen():
    """No function of the package, its scripts, examples and benchmarks is longer than MAX_LINES
    lines (docs/design.md, "Package map")."""
    long = []
    roots = [PLUGIN_DIR] + [os.path.join(REPO, d) for d in ("scripts", "examples", "benchmarks")]
    for directory, _, files in (walked for root in roots for walked in os.walk(root)):
        for name in (n for n in files if n.endswith(".py")):
            path = os.path.join(directory, name)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            long += [
                f"{os.path.relpath(path, REPO)}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines"
                for node in ast.walk(tree)
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.end_lineno - node.lineno + 1 > MAX_LINES
            ]
    assert not long, "\n".join(long)
