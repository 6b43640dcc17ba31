"""The docs describe the tree as it is: the package layout of docs/design.md names every
module, kernel file and data file of the package, and nothing that is not there."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE_FILES = (".py", ".pyx", ".cu", ".cuh", ".json")


def _layout_paths() -> set[str]:
    """The paths the first column of design.md's package layout table names. A row may
    list several files, the later ones by name alone, in the first one's folder."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    section = text.split("## Package layout", 1)[1].split("\n## ", 1)[0]
    paths = set()
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        folder = None
        for name in re.findall(r"`([^`]+)`", line.split("|")[1]):
            if "/" in name:
                name = name.rstrip("/")
                folder = name.rsplit("/", 1)[0] if "." in name.rsplit("/", 1)[-1] else name
                paths.add(name)
            elif folder is not None:
                paths.add(f"{folder}/{name}")
    return paths


def test_design_file_map_matches_the_tree():
    listed = _layout_paths()
    assert "cubsparse/_cuda/run.py" in listed  # the parser reads the table
    package = {str(p.relative_to(ROOT)) for p in (ROOT / "cubsparse").rglob("*")
               if p.suffix in PACKAGE_FILES and "__pycache__" not in p.parts}
    assert sorted(package - listed) == [], "files the layout table does not name"
    assert sorted(n for n in listed if not (ROOT / n).exists()) == [], \
        "names in the layout table that are not in the tree"
