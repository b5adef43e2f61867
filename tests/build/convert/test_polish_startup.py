"""`mmbu convert` on one slide imports only what a slide needs: start-up is part of the time a user
waits for a thumbnail (benchmarks/RESULTS.md, "Whole-slide thumbnails vs libvips")."""
import json
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
# Modules that other formats, other stages or a terminal need, never a slide converted in a script.
NOT_FOR_A_SLIDE = (
    "pandas", "pyarrow", "scipy", "pydicom", "nibabel", "requests", "aiohttp", "pydantic", "yaml",
    "rich", "concurrent.futures.process", "mmbu.curation", "mmbu.taxonomy",
)


def test_converting_a_slide_loads_no_other_stage_or_format(tmp_path):
    script = (
        "import json, sys; from mmbu.cli import main\n"
        "try:\n    main()\n"
        "except SystemExit as exit:\n    code = exit.code\n"
        f"print(json.dumps([code, sorted(m for m in {NOT_FOR_A_SLIDE!r} if m in sys.modules)]))\n"
    )
    argv = ["mmbu", "convert", str(FIXTURES / "boxes.tiff"), "--out", str(tmp_path / "out")]
    result = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.argv = {argv!r}\n" + script],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    code, loaded = json.loads(result.stdout.splitlines()[-1])
    assert code == 0 and (tmp_path / "out" / "boxes.png").is_file()
    assert loaded == []
