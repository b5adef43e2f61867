"""The house rules of docs/architecture.md §2, as import-linter contracts (`.importlinter`): imports only point down,
relative imports included; benchmark_eval needs no build stack; the bare name `build` is never imported.

The stages are separate top-level folders that setup.py maps into one `mmbu` package, and import-linter (grimp)
finds a package's modules by walking its folder. So each test lays the folders out as the wheel installs them
(symlinks under tmp/mmbu/) and runs `lint-imports` on that copy of the import graph.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def stage_folders() -> dict[str, str]:
    """setup.py's STAGE_FOLDERS (package -> folder), the mapping the wheel installs (read, not run)."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "STAGE_FOLDERS")
    return ast.literal_eval(node.value)


# import-linter's `lint-imports` script, run by this interpreter: a worktree's venv may import the package
# without having the script on PATH
LINT_IMPORTS = [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()"]


def installed_layout(target: Path, extra: dict[str, str] | None = None) -> Path:
    """`target/mmbu/...` as installed: one symlink per source file and folder of each stage's top folder;
    `extra` adds files (path -> text) there. An extra file must sit directly in a stage's folder (mmbu/<stage>/x.py):
    deeper, it would be written through a symlink into the repository."""
    for package, folder in stage_folders().items():
        where = target.joinpath(*package.split("."))
        where.mkdir(parents=True, exist_ok=True)
        for entry in (ROOT / folder).iterdir():
            if entry.name != "__pycache__" and not where.joinpath(entry.name).exists():
                where.joinpath(entry.name).symlink_to(entry)
    for path, text in (extra or {}).items():
        assert not target.joinpath(path).parent.is_symlink(), path
        target.joinpath(path).write_text(text, encoding="utf-8")
    return target


def lint_imports(layout: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(layout)}
    return subprocess.run([*LINT_IMPORTS, "--config", str(ROOT / ".importlinter"), "--no-cache"], cwd=layout,
                          env=env, capture_output=True, text=True)


def test_every_layer_contract_is_kept(tmp_path):
    result = lint_imports(installed_layout(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 kept, 0 broken" in result.stdout


def test_a_relative_import_up_the_layers_is_caught(tmp_path):
    """What the hand-written AST check this replaced let through: `from ...build.steps import x` in curation."""
    layout = installed_layout(tmp_path, {"mmbu/curation/upward.py": "from ..build.steps import DatasetJob\n"})
    result = lint_imports(layout)
    assert result.returncode == 1
    assert "mmbu.curation.upward -> mmbu.build.steps" in result.stdout and "BROKEN" in result.stdout


def test_core_imports_no_stage_and_eval_no_build_stack(tmp_path):
    layout = installed_layout(tmp_path, {"mmbu/core/leak.py": "from mmbu.taxonomy import model\n",
                                         "mmbu/benchmark_eval/leak.py": "from ..curation.manifest import model\n",
                                         "mmbu/build/bare.py": "import build\n"})
    result = lint_imports(layout)
    assert result.returncode == 1
    for line in ("mmbu.core.leak -> mmbu.taxonomy", "mmbu.benchmark_eval.leak -> mmbu.curation.manifest",
                 "mmbu.build.bare -> build"):
        assert line in result.stdout, result.stdout
    assert "1 kept, 3 broken" in result.stdout
