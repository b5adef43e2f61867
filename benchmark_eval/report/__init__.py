"""Reports of scored runs: Markdown with the paper's table shape, CSV/JSON, PNG plots."""
