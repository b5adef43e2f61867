"""`make test` must run every test file: pytest skips folders named `build` unless told otherwise."""
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_every_test_file_is_collected():
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
                            cwd=TESTS.parent, capture_output=True, text=True, timeout=300)
    collected = {line.split("::", 1)[0] for line in result.stdout.splitlines() if "::" in line}
    on_disk = {str(p.relative_to(TESTS.parent)) for p in TESTS.rglob("test_*.py")}
    assert "tests/build/test_pipeline.py" in on_disk
    assert sorted(on_disk - collected) == []
