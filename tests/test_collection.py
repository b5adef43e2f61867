"""`make test` must run every test file: pytest skips folders named `build` unless told otherwise."""
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def collected_files(request) -> set[str]:
    """The test files this very session collected when it runs the whole suite (every xdist worker collects all
    of it), else those of a fresh `pytest --collect-only` of the whole suite."""
    whole_suite = all(Path(arg).resolve() in (TESTS, TESTS.parent) for arg in request.config.args)
    if whole_suite:
        return {str(Path(item.fspath).relative_to(TESTS.parent)) for item in request.session.items}
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
                            cwd=TESTS.parent, capture_output=True, text=True, timeout=300)
    return {line.split("::", 1)[0] for line in result.stdout.splitlines() if "::" in line}


def test_every_test_file_is_collected(request):
    on_disk = {str(p.relative_to(TESTS.parent)) for p in TESTS.rglob("test_*.py")}
    assert "tests/build/test_pipeline.py" in on_disk
    assert sorted(on_disk - collected_files(request)) == []
