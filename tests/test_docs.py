"""The tracked files: every relative link and image of the Markdown points at a file (and heading)
of the repository, and no file names a local path of the machine that wrote it."""

import collections
import re
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

# the tracked files are what a clone has (git ls-files / git grep); an unpacked archive has no .git
pytestmark = pytest.mark.skipif(not Path(REPO, ".git").exists(), reason="not a git checkout")
LINK = re.compile(r"\]\(([^)\s]+)\)")  # [text](target) and ![alt](target)


def markdown_files():
    listed = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    return [Path(REPO, name) for name in listed]


def anchors(path):
    """The anchors of path's headings, as GitHub makes them (lower case, punctuation dropped, spaces
    to hyphens, -1, -2, ... after repeats); headings inside code blocks are not headings."""
    made, repeats, in_code = set(), collections.Counter(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        in_code ^= line.startswith("```")
        heading = re.match(r"#+\s+(.*)", line)
        if heading and not in_code:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            made.add(f"{slug}-{repeats[slug]}" if repeats[slug] else slug)
            repeats[slug] += 1
    return made


def broken_links(path):
    for target in LINK.findall(path.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # a URL
        name, _, anchor = target.partition("#")
        linked = path.parent / name if name else path
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in anchors(linked)):
            yield target


def test_relative_links_in_markdown_resolve():
    files = markdown_files()
    assert len(files) > 10 and Path(REPO, "README.md") in files
    broken = {str(p.relative_to(REPO)): list(broken_links(p)) for p in files}
    assert not {name: links for name, links in broken.items() if links}


def test_no_tracked_file_names_a_local_path():
    """Generated reports and docs name paths as placeholders (WORK, path/to/...), never the absolute
    or sibling paths of the machine that wrote them."""
    local = r"(/home/|/root/|/tmp/pytest|/work/(runs|shared|main)|\.\./shared/)"
    found = subprocess.run(
        ["git", "grep", "-n", "-I", "-E", local, "--", ".", ":!tests/test_docs.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert found.returncode == 1, found.stdout[:2000]  # git grep: 1 = no match, 2 = error


def test_package_map_names_every_module():
    """docs/design.md's package map names each module of the package's top level and of its
    criterions/, modules/ and models/ (by file name), and each subpackage (as name/): a module added
    without its line in the map fails here."""
    design = Path(REPO, "docs", "design.md").read_text(encoding="utf-8")
    package_map = design.split("## Package map", 1)[1].split("\n## ", 1)[0]
    package = Path(REPO, "fairseq_ctemp")
    modules = [p for d in ("", "criterions", "modules", "models") for p in (package / d).glob("*.py")]
    unnamed = [str(p.relative_to(package)) for p in modules if p.name != "__init__.py"]
    unnamed = [name for name in unnamed if not re.search(rf"\b{re.escape(Path(name).name)}\b", package_map)]
    packages = [p.name for p in package.iterdir() if (p / "__init__.py").exists()]
    unnamed += [f"{name}/" for name in packages if f"{name}/" not in package_map]
    assert len(modules) > 40 and len(packages) > 5
    assert not unnamed, f"not in docs/design.md's package map: {unnamed}"
