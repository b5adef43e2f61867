"""The floor beneath every stage: contracts and small helpers that more than one stage needs.

`mmbu.taxonomy`, `mmbu.curation`, `mmbu.build` and `mmbu.benchmark_eval` may import it; it imports none of
them (the import-linter contracts in `.importlinter` hold both rules). One module per thing, imported by
its full name (`from mmbu.core.files import write_text_atomic`), so that importing one costs only that one:

    files       atomic writes (temp file beside the target, fsync, rename) and the umask-honouring modes
    version     the installed toolkit version
    cli         the exit codes, the exit-2 `InvalidInput` exception and the lazily importing command group
    retry_after seconds to wait from an HTTP `Retry-After` header
    licences    raw licence strings of each host (Zenodo, Hugging Face, Kaggle) to SPDX ids: one table
    boxes       `Box` / `PixelBox`, IoU and the release's spelling of a box
    exclusions  `Exclusion`: an item some stage dropped, and the columns of `exclusions.csv`
    geometry    `ConversionGeometry`: how a converter took the stored pixel grid to the PNG, step by step
    release     the release contract: tasks, forms, templates, every column with its type (and the HF features)
    runs        the file names of an evaluation run directory
    text        file names as printable text, long values shortened in messages
    secrets     credentials kept out of every error, record and log line
    yaml_io     YAML read safely, strictly and within bounds
    chat        the OpenAI chat-completions wire format (request body, reading an answer) both LLM clients use
    budget      what one image, volume, array, cell, canvas, mask, annotation file or video may cost, from its header
    outputs     CSV and Markdown a person opens: no formula, no control byte, no markup from what sources wrote
"""
