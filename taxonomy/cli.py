"""`mmbu taxonomy validate|show`: check the expert taxonomy, or print it as a tree with counts."""
from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.tree import Tree

from mmbu.core.cli import InvalidInput
from mmbu.taxonomy.model import DEFAULT_TAXONOMY_PATH, Taxonomy, TaxonomyError, Term, load_taxonomy
from mmbu.taxonomy.validation import validate_taxonomy

TAXONOMY_OPTION = click.option(
    "--taxonomy",
    "taxonomy_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help=f"Taxonomy YAML to use (default: the bundled {DEFAULT_TAXONOMY_PATH.name}).",
)




def _load(path: Path | None) -> Taxonomy:
    try:
        return load_taxonomy(path)
    except TaxonomyError as exc:
        raise InvalidInput(str(exc)) from None


@click.group()
def taxonomy() -> None:
    """Validate or show the expert taxonomy (facets of terms with synonyms and abbreviations)."""


@taxonomy.command()
@TAXONOMY_OPTION
def validate(taxonomy_path: Path | None) -> None:
    """Check ids, names, parents, cycles and synonym clashes; report every problem at once.

    Exit 0 when valid, 2 when the file is invalid or cannot be read.
    """
    loaded = _load(taxonomy_path)
    problems = validate_taxonomy(loaded)
    if problems:
        lines = [f"{loaded.source}: {problem}" for problem in problems]
        raise InvalidInput("\n".join([*lines, f"{len(problems)} problem(s) found."]))
    counts = ", ".join(f"{len(facet.terms)} {name}" for name, facet in loaded.facets.items())
    click.echo(f"{loaded.source}: valid ({counts}).")


@taxonomy.command()
@TAXONOMY_OPTION
@click.option("--facet", "facets", multiple=True, help="Show only this facet (repeatable).")
def show(taxonomy_path: Path | None, facets: tuple[str, ...]) -> None:
    """Print the taxonomy as a tree: facets, then terms under their parents, with counts."""
    loaded = _load(taxonomy_path)
    unknown = [name for name in facets if name not in loaded.facets]
    if unknown:
        raise click.UsageError(f"unknown facet(s) {', '.join(unknown)}; the facets are {', '.join(loaded.facets)}")
    root = Tree(f"[bold]{loaded.source}[/bold]")
    for name in facets or tuple(loaded.facets):
        root.add(facet_tree(loaded, name))
    Console(soft_wrap=True).print(root)


def facet_tree(loaded: Taxonomy, facet_name: str) -> Tree:
    """One facet as a rich Tree. Terms nest under their parent; a facet whose parents live in another
    facet (sub_modality under modality) is grouped by those parents. Counts are of descendants."""
    facet = loaded.facets[facet_name]
    node = Tree(f"[bold cyan]{facet_name}[/bold cyan] ({len(facet.terms)} terms)")
    children: dict[str | None, list[Term]] = {}
    ids = {term.id for term in facet.terms}
    cross_facet = facet.parent_facet not in (None, facet_name)
    for term in facet.terms:
        key = term.parent if (cross_facet or term.parent in ids) else None
        children.setdefault(key, []).append(term)

    def add(branch: Tree, term: Term, trail: frozenset[str]) -> None:
        kids = [] if cross_facet or term.id in trail else children.get(term.id, [])
        label = term.name + (f" ({_count(term.id, trail)})" if kids else "")
        sub = branch.add(label)
        for kid in kids:
            add(sub, kid, trail | {term.id})

    def _count(term_id: str, trail: frozenset[str]) -> int:
        if term_id in trail:
            return 0
        kids = children.get(term_id, [])
        return len(kids) + sum(_count(kid.id, trail | {term_id}) for kid in kids)

    if cross_facet:
        for parent_id, terms in children.items():
            parent = loaded.get(facet.parent_facet, parent_id) if parent_id else None
            title = parent.name if parent else f"(parent {parent_id!r} missing)" if parent_id else "(no parent)"
            group = node.add(f"[dim]{facet.parent_facet}:[/dim] {title} ({len(terms)})")
            for term in terms:
                add(group, term, frozenset())
    else:
        for term in children.get(None, []):
            add(node, term, frozenset())
    return node
