"""A no-op rebuild starts in the time its imports take: `mmbu build` must not load what only a step that runs needs."""
from __future__ import annotations

import json
import subprocess
import sys


def test_the_build_command_loads_neither_scipy_nor_huggingface_hub():
    probe = ("import json, sys; import mmbu.build.cli; "
             "print(json.dumps(sorted(m for m in ('scipy', 'huggingface_hub') if m in sys.modules)))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    # scipy.ndimage (0.3 s) only when a layout step labels masks; huggingface_hub (0.25 s) only to fetch from the Hub
    assert json.loads(loaded) == []
