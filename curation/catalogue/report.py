"""The catalogue's coverage as Markdown (also the CI job summary), JSON and a bar chart PNG."""
from __future__ import annotations

from pathlib import Path

from mmbu.core.files import write_bytes_atomic, write_text_atomic
from mmbu.core.outputs import markdown_cell
from mmbu.curation.catalogue.composition import composition_markdown
from mmbu.curation.catalogue.coverage import Coverage, Tally


def _samples(tally: Tally) -> str:
    known = f"{tally.samples:,}"
    return known + (f" (+{tally.unknown_counts} without a count)" if tally.unknown_counts else "")


def _table(title: str, rows: list[Tally], target: dict[str, int] | None = None) -> list[str]:
    head = f"| {title} | datasets | expected samples |" + (" paper |" if target else "")
    lines = [head, "|---|---|---|" + ("---|" if target else "")]
    for row in rows:
        line = f"| {markdown_cell(row.name)} | {row.datasets} | {_samples(row)} |"
        lines.append(line + (f" {target.get(row.name, '-')} |" if target else ""))
    return lines


def to_markdown(coverage: Coverage, compare: Coverage | None = None) -> str:
    paper = coverage.paper
    covered_subs = sum(s.datasets > 0 for m in coverage.modalities for s in m.sub_modalities)
    all_subs = sum(len(m.sub_modalities) for m in coverage.modalities)
    lines = [
        "# Catalogue coverage", "",
        f"`{coverage.manifests_dir}`: **{coverage.datasets}** dataset(s) of the paper's {paper.datasets}; "
        f"**{coverage.samples:,}** expected samples of about {paper.samples:,}"
        + (f" ({coverage.unknown_counts} dataset(s) state no count)" if coverage.unknown_counts else "") + "; "
        f"{sum(m.datasets > 0 for m in coverage.modalities)} of {len(coverage.modalities)} modalities and "
        f"{covered_subs} of {all_subs} taxonomy sub-modalities have a dataset (the paper: {paper.modalities} and "
        f"{paper.sub_modalities}).",
    ]
    if coverage.unreadable:
        lines += ["", f"**{len(coverage.unreadable)} manifest(s) could not be read** (not counted):", ""]
        lines += [f"- {line}" for line in coverage.unreadable]
    if compare is not None:
        lines += ["", *changes(compare, coverage)]
    lines += ["", "## Per source kind (the paper's split)", "",
              *_table("kind", coverage.source_kinds, paper.sources_by_kind), "",
              "## Per benchmark task", "", *_table("task", coverage.tasks), "",
              "## Per modality and sub-modality", "",
              "| modality | sub-modality | datasets | expected samples |", "|---|---|---|---|"]
    for modality in coverage.modalities:
        lines.append(f"| **{modality.name}** | (all) | **{modality.datasets}** | {_samples(modality)} |")
        lines += [f"| | {sub.name} | {sub.datasets} | {_samples(sub)} |" for sub in modality.sub_modalities
                  if sub.datasets]
    for tally in coverage.unresolved_modality:
        lines.append(f"| {markdown_cell(tally.name)} (not a taxonomy modality) | | {tally.datasets} | "
                     f"{_samples(tally)} |")
    lines += ["", "**Gaps** (taxonomy terms without a dataset):", ""]
    lines.append(f"- modalities: {', '.join(coverage.modality_gaps) or 'none'}")
    for modality in coverage.modalities:
        if modality.gaps and modality.datasets:
            lines.append(f"- {modality.name}: {', '.join(modality.gaps)}")
    if coverage.composition is not None:
        lines += ["", "## Composition: rows per profile", "", *composition_markdown(coverage.composition)]
    lines += ["", "## Per host", "", *_table("host", coverage.hosts), "",
              "## Per licence", "", *_table("licence (SPDX)", coverage.licences), "",
              "## Per verification level", "",
              "The weakest level among host, licence and layout evidence (`evidence:` in each manifest):", "",
              *_table("level", coverage.levels), "",
              "| fact | " + " | ".join(next(iter(coverage.fact_levels.values()), {})) + " |",
              "|---|" + "---|" * len(next(iter(coverage.fact_levels.values()), {}))]
    lines += [f"| {fact} | " + " | ".join(str(n) for n in levels.values()) + " |"
              for fact, levels in coverage.fact_levels.items()]
    lines += ["", "## Evidence summary", "",
              "Each dataset once, by the weakest thing a reviewer must take on trust: **unverified** (a host, licence "
              "or layout fact with no confirming source), else **single-listing** (the licence rests on one "
              "third-party listing), else **secondary** (a third party's word for the host, licence or layout), else "
              "**primary** (the host's or authors' own pages and files for all three):", "",
              *_table("evidence", coverage.evidence)]
    if any(coverage.audit.values()):
        lines += ["", "## Audit patterns", "",
                  "Shapes an audit of the evidence found, hunted through the whole catalogue "
                  "(`mmbu.curation.manifest.audit`):", ""]
        lines += [f"- {finding}" for findings in coverage.audit.values() for finding in findings]
    single = next((t for t in coverage.licence_bases if t.name == "single listing"), None)
    lines += ["", "## Licence basis", "",
              "Whose word each licence rests on: the host's own page or files, two or more independent listings that "
              "agree, or a single third-party listing (`licence_single_listing: true` in the manifest's evidence):", "",
              *_table("basis", coverage.licence_bases), ""]
    if single and single.dataset_ids:
        lines.append(f"Single-listing licences: {', '.join(sorted(single.dataset_ids))}")
    return "\n".join(lines) + "\n"


def changes(before: Coverage, after: Coverage) -> list[str]:
    """What moved between two coverages (e.g. the base branch and a pull request)."""
    old = {d for m in before.modalities for d in m.dataset_ids} | {d for t in before.unresolved_modality
                                                                   for d in t.dataset_ids}
    new = {d for m in after.modalities for d in m.dataset_ids} | {d for t in after.unresolved_modality
                                                                  for d in t.dataset_ids}
    lines = ["## Changes against the base", ""]
    lines.append(f"- datasets: {before.datasets} → {after.datasets}; expected samples: {before.samples:,} → "
                 f"{after.samples:,}")
    if new - old:
        lines.append(f"- added: {', '.join(sorted(new - old))}")
    if old - new:
        lines.append(f"- removed: {', '.join(sorted(old - new))}")
    for title, first, second in (("modality", before.modalities, after.modalities),
                                 ("source kind", before.source_kinds, after.source_kinds),
                                 ("licence", before.licences, after.licences),
                                 ("verification level", before.levels, after.levels),
                                 ("licence basis", before.licence_bases, after.licence_bases),
                                 ("evidence summary", before.evidence, after.evidence)):
        was = {t.name: t.datasets for t in first}
        moved = [f"{t.name} {was.get(t.name, 0)} → {t.datasets}" for t in second if was.get(t.name, 0) != t.datasets]
        moved += [f"{name} {count} → 0" for name, count in was.items()
                  if count and name not in {t.name for t in second}]
        if moved:
            lines.append(f"- per {title}: {'; '.join(moved)}")
    filled = {s.name for m in after.modalities for s in m.sub_modalities if s.datasets} - {
        s.name for m in before.modalities for s in m.sub_modalities if s.datasets}
    if filled:
        lines.append(f"- gaps filled: {', '.join(sorted(filled))}")
    return lines if len(lines) > 3 or new != old else [*lines, "- nothing else changed"]


def chart_png(coverage: Coverage) -> bytes:
    """Six bar panels: datasets and expected samples per modality, source kinds against the paper, hosts,
    licences, verification levels."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(2, 3, figsize=(18, 10))
    modalities = [m.name for m in coverage.modalities]
    panels = [
        (axes[0, 0], "datasets per modality", modalities, [m.datasets for m in coverage.modalities], None),
        (axes[0, 1], "expected samples per modality", modalities, [m.samples for m in coverage.modalities], None),
        (axes[0, 2], "source kinds: catalogue vs paper", [t.name for t in coverage.source_kinds],
         [t.datasets for t in coverage.source_kinds],
         [coverage.paper.sources_by_kind.get(t.name, 0) for t in coverage.source_kinds]),
        (axes[1, 0], "datasets per host", [t.name for t in coverage.hosts][:12],
         [t.datasets for t in coverage.hosts][:12], None),
        (axes[1, 1], "datasets per licence", [t.name for t in coverage.licences][:12],
         [t.datasets for t in coverage.licences][:12], None),
        (axes[1, 2], "datasets per verification level", [t.name for t in coverage.levels],
         [t.datasets for t in coverage.levels], None),
    ]
    for axis, title, names, values, paper in panels:
        positions = range(len(names))
        axis.barh(list(positions), values, height=0.8 if paper is None else 0.35, color="#4c72b0", label="catalogue")
        if paper is not None:
            axis.barh([p + 0.4 for p in positions], paper, height=0.35, color="#dd8452", label="paper")
            axis.legend(loc="lower right")
        axis.set_yticks(list(positions), names, fontsize=8)
        axis.invert_yaxis()
        axis.set_title(title)
    figure.suptitle(f"{coverage.datasets} datasets, {coverage.samples:,} expected samples "
                    f"(paper: {coverage.paper.datasets}, about {coverage.paper.samples:,})")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80)
    pyplot.close(figure)
    return buffer.getvalue()


def write_report(coverage: Coverage, out_dir: Path, compare: Coverage | None = None) -> dict[str, Path]:
    """catalogue.md, catalogue.json and catalogue.png in `out_dir`, each written atomically."""
    out_dir = Path(out_dir)
    paths = {"markdown": out_dir / "catalogue.md", "json": out_dir / "catalogue.json",
             "chart": out_dir / "catalogue.png"}
    write_text_atomic(paths["markdown"], to_markdown(coverage, compare))
    write_text_atomic(paths["json"], coverage.model_dump_json(indent=1) + "\n")
    write_bytes_atomic(paths["chart"], chart_png(coverage))
    return paths
