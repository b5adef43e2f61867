"""`mmbu eval models`: the model registry as a table (or JSON), one entry in full, "did you mean" for a typo."""
from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

from mmbu.benchmark_eval.models.box_format import SmartResize
from mmbu.benchmark_eval.models.registry import ModelEntry, Registry, RegistryError, load_registry
from mmbu.core.cli import InvalidInput
from mmbu.core.progress import output_console


def box_convention(entry: ModelEntry) -> str:
    """'norm1000 xyxy', 'pixel xyxy' ..."""
    return f"{entry.box_format.scale} {entry.box_format.order}"


def resize_rule(entry: ModelEntry) -> str:
    """What the runner does to an image before sending it to this model, in one phrase."""
    parts = []
    resize = entry.box_format.resize
    if isinstance(resize, SmartResize):
        parts.append(f"qwen25_smart_resize(min {resize.min_pixels:,} px, max {resize.max_pixels:,} px, "
                     f"factor {resize.factor})")
    elif entry.image.max_pixels:
        parts.append(f"max {entry.image.max_pixels:,} px")
    if entry.image.max_side:
        parts.append(f"max side {entry.image.max_side}")
    pad = entry.image.square_pad
    if pad is not None:
        parts.append(f"pad to square ({pad.position}, fill {tuple(pad.fill)})")
    if entry.image.encoding != "png" or entry.image.max_bytes:
        parts.append(entry.image.encoding + (f" ≤ {entry.image.max_bytes / 1e6:g} MB" if entry.image.max_bytes else ""))
    return "; ".join(parts) or "sent as released"


def registry_rows(registry: Registry) -> list[dict]:
    """One row per entry: what `mmbu eval models` shows (and `--json` writes)."""
    return [{"id": entry.name, "aliases": [n for n in registry.names_of(entry) if n != entry.name],
             "family": entry.family, "backends": list(entry.backends), "box_convention": box_convention(entry),
             "resize": resize_rule(entry), "source": entry.source.box_format} for entry in registry.models]


@click.command("models")
@click.argument("name", required=False)
@click.option("--registry", "registry_path", type=click.Path(path_type=Path, dir_okay=False, exists=True), default=None,
              help="Another model registry YAML (default: the bundled one).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def models(name: str | None, registry_path: Path | None, as_json: bool) -> None:
    """List the models the registry knows: id, aliases (paper name, HF id, API name), box
    convention, image resize rule and where the convention was read. With NAME, that one
    entry in full; an unknown NAME gets the closest registered names (exit 2).
    """
    try:
        registry = load_registry(registry_path)
        if name is not None:
            entry = registry.get(name)
    except RegistryError as exc:
        raise InvalidInput(str(exc)) from None
    if name is not None:
        click.echo(json.dumps(entry.model_dump(mode="json"), indent=2, ensure_ascii=False))
        return
    rows = registry_rows(registry)
    if as_json:
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    table = Table(title=f"{len(rows)} models in the registry (`--model` takes any name in the first two columns)")
    # identifiers are never cut (folded onto more lines if need be); the long resize and source texts wrap
    for column, width in (("id", None), ("aliases", None), ("box convention", None), ("resize", 40), ("source", 60)):
        table.add_column(column, overflow="fold", max_width=width)
    for row in rows:
        table.add_row(row["id"], ", ".join(row["aliases"]), row["box_convention"], row["resize"], row["source"])
    output_console(stderr=False).print(table)
