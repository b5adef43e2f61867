"""The house rules of DESIGN §2: imports only point down the layers."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# folder -> mmbu sub-packages it must never import
FORBIDDEN = {
    "core": ("mmbu.taxonomy", "mmbu.curation", "mmbu.build", "mmbu.benchmark_eval", "mmbu.cli"),
    "taxonomy": ("mmbu.curation", "mmbu.build", "mmbu.benchmark_eval", "mmbu.cli"),
    "curation": ("mmbu.build", "mmbu.benchmark_eval", "mmbu.cli"),
    "build": ("mmbu.benchmark_eval", "mmbu.cli"),
    "benchmark_eval": ("mmbu.build", "mmbu.curation", "mmbu.cli"),
}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_imports_point_down(folder):
    offences = []
    for source in (ROOT / folder).rglob("*.py"):
        for name in imported_modules(source):
            if name == "build" or name.startswith("build."):
                offences.append(f"{source.relative_to(ROOT)} imports the bare name {name!r}; use mmbu.build")
            if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN[folder]):
                offences.append(f"{source.relative_to(ROOT)} imports {name}")
    assert not offences, "\n".join(offences)
