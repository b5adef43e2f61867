"""The Markdown report: the paper's results table (closed / open (Δ) per task), CIs, diagnostics."""
from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from mmbu.benchmark_eval.scoring.baselines import expected_f1
from mmbu.benchmark_eval.scoring.overall import AVERAGING
from mmbu.benchmark_eval.scoring.results import OverallDelta, OverallScore
from mmbu.benchmark_eval.scoring.scores import ScoreReport
from mmbu.core.outputs import markdown_cell
from mmbu.core.release import FORMS, TASK_TITLES, TASKS, TEMPLATES, Form

TEMPLATE_TITLES = {"no_context": "No Context", "modality": "Modality", "full_context": "Full Context"}


def _f(value: float | None, digits: int = 3) -> str:
    return "—" if value is None or pd.isna(value) else f"{value:.{digits}f}"


def _markdown(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (no extra dependency such as tabulate)."""
    header = "| " + " | ".join(markdown_cell(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = ["| " + " | ".join(markdown_cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


def random_baselines(report: ScoreReport) -> dict[tuple[str, str], float]:
    """(task, form) → expected F1 of a random answerer over every scored sample of that task and form.

    The baseline depends on the samples, not on the model: each sample counts once.
    """
    scored = report.outcomes[report.outcomes["scored"]]
    unique = scored.drop_duplicates(["task", "form", "sample_id"])
    return {(task, form): expected_f1(group["random_p"], group["n_gold"])
            for (task, form), group in unique.groupby(["task", "form"])}


def results_table(report: ScoreReport, template: str, display: Callable[[str], str]) -> pd.DataFrame:
    """The paper's table for one template: a row per model, a ``closed / open (Δ)`` cell per task, and the overall
    (the unweighted mean of the tasks, `scoring.overall`) beside them."""
    scores = {(s.model, s.task, s.form): s for s in report.scores if s.template == template}
    deltas = {(d.model, d.task): d for d in report.deltas if d.template == template}
    overall = {(o.model, o.form): o.f1 for o in report.overall
               if isinstance(o, OverallScore) and o.template == template}
    overall_deltas = {o.model: o.delta for o in report.overall
                      if isinstance(o, OverallDelta) and o.template == template}
    tasks = [t for t in TASKS if any(key[1] == t for key in scores)]
    models = list(dict.fromkeys(s.model for s in report.scores))
    rows = []
    for model in models:
        row = {"Model": display(model)}
        for task in tasks:
            closed = scores.get((model, task, Form.CLOSED))
            opened = scores.get((model, task, Form.OPEN))
            delta = deltas.get((model, task))
            text = f"{_f(closed.f1 if closed else None)} / {_f(opened.f1 if opened else None)}"
            row[TASK_TITLES[task]] = text + (f" ({_f(delta.delta)})" if delta else "")
        closed, opened = overall.get((model, Form.CLOSED)), overall.get((model, Form.OPEN))
        row["Overall"] = f"{_f(closed)} / {_f(opened)}" + (
            f" ({_f(overall_deltas[model])})" if model in overall_deltas else "")
        rows.append(row)
    baselines = random_baselines(report)
    random_row = {"Model": "Random"}
    for task in tasks:
        random_row[TASK_TITLES[task]] = " / ".join(_f(baselines.get((task, form))) for form in FORMS)
    random_row["Overall"] = " / ".join(_f(_mean([baselines.get((task, form)) for task in tasks]))
                                       for form in FORMS)
    rows.append(random_row)
    return pd.DataFrame(rows)


def _mean(values: list[float | None]) -> float | None:
    return None if not values or any(v is None for v in values) else sum(values) / len(values)


def provenance_table(provenance: dict, display: Callable[[str], str]) -> pd.DataFrame:
    """One row per run: the release, the model and judge as configured and as their servers reported them,
    the prompt versions, the toolkit that ran it, when, and the command (cells made safe by `_markdown`)."""
    rows = []
    for run in provenance.get("runs", []):
        def value(name: str) -> str:
            return run.get(name) or "—"

        judge = f"{run['judge_model']} (reported: {value('judge_reported')})" if run.get("judge_model") else "—"
        rows.append({"Model": display(run.get("model") or "?"), "Served as (reported)": value("model_reported"),
                     "Release": f"{value('release_version')} (inputs {(run.get('release_inputs_hash') or '—')[:12]})",
                     "Prompt": value("prompt_version"), "Judge": judge, "Judge prompt": value("judge_prompt_version"),
                     "Run with mmbu": value("run_toolkit_version"),
                     "Run": f"{value('run_started_at')} → {value('run_finished_at')}",
                     "Command": value("run_command_line")})
    return pd.DataFrame(rows)


def _configuration(model: str, task: str, form: str, template: str, display: Callable[[str], str]) -> dict:
    """The four cells naming a configuration, in the report's words."""
    return {"Model": display(model), "Task": TASK_TITLES.get(task, task), "Form": form,
            "Template": TEMPLATE_TITLES.get(template, template)}


def ci_table(report: ScoreReport, display: Callable[[str], str]) -> pd.DataFrame:
    """A row per configuration, then per model, form and template the overall row (mean of the tasks, no CI)."""
    rows = []
    for s in report.scores:
        rows.append({**_configuration(*s.config, display), "n": s.n, "F1": _f(s.f1),
                     "95% CI": f"[{_f(s.ci_low)}, {_f(s.ci_high)}]", "Random": _f(s.random_baseline)})
    for o in report.overall:
        if isinstance(o, OverallScore):
            rows.append({**_configuration(o.model, f"Overall ({o.tasks} tasks)", o.form, o.template, display),
                         "n": o.n, "F1": _f(o.f1), "95% CI": "—", "Random": "—"})
    return pd.DataFrame(rows)


def strict_assisted_table(report: ScoreReport, display: Callable[[str], str]) -> pd.DataFrame:
    """Closed configurations: the strict F1 (the paper's protocol) beside the assisted F1, and the unparseable share."""
    rows = []
    for s in report.scores:
        if s.form != Form.CLOSED:
            continue
        assisted = "—" if s.assisted_f1 is None else (
            f"{_f(s.assisted_f1)} [{_f(s.assisted_ci_low)}, {_f(s.assisted_ci_high)}]")
        rows.append({"Model": display(s.model), "Task": TASK_TITLES.get(s.task, s.task),
                     "Template": TEMPLATE_TITLES.get(s.template, s.template), "n": s.n,
                     "Strict F1": f"{_f(s.f1)} [{_f(s.ci_low)}, {_f(s.ci_high)}]", "Assisted F1": assisted,
                     "Unparseable": f"{s.parse_failures} ({_f(s.unparseable_share, 3)})",
                     "Read by the extractor": s.extracted if s.assisted_f1 is not None else "—"})
    return pd.DataFrame(rows)


def diagnostics_table(report: ScoreReport, display: Callable[[str], str]) -> pd.DataFrame:
    rows = []
    for d in report.diagnostics:
        rows.append({**_configuration(d.model, d.task, d.form, d.template, display), "Records": d.records,
                     "Run errors": d.run_errors,
                     "Parse failures": f"{d.parse_failures} ({_f(d.parse_failure_rate, 3)})",
                     "Judge errors": f"{d.judge_failed + d.judge_pending} ({_f(d.judge_error_rate, 3)})",
                     "Pre-checked": d.precheck})
    return pd.DataFrame(rows)


def paired_table(report: ScoreReport, display: Callable[[str], str]) -> pd.DataFrame:
    rows = []
    for p in report.paired:
        if p.task != "all" and p.template != "no_context":
            continue
        rows.append({"A": display(p.model_a), "B": display(p.model_b),
                     "Task": TASK_TITLES.get(p.task, "all records"), "Form": p.form,
                     "Template": TEMPLATE_TITLES.get(p.template, p.template), "n": p.n,
                     "A wins": f"{p.wins} ({_f(p.win_rate, 3)})", "Ties": p.ties,
                     "B wins": f"{p.losses} ({_f(p.loss_rate, 3)})"})
    return pd.DataFrame(rows)


def markdown_report(report: ScoreReport, display: Callable[[str], str], plots: dict[str, str],
                    agreement: list[dict], options_text: str, provenance: dict | None = None) -> str:
    """The whole report as Markdown; `plots` maps a title to a PNG file name beside the report; `provenance`
    (`scoring.provenance.scoring_provenance`) heads it."""
    parts = ["# MMBU evaluation report", ""]
    if provenance:
        parts += [f"Scored {provenance['scored_at']} with mmbu {provenance['scored_with_toolkit_version']}: "
                  f"{markdown_cell(provenance['command_line'])}", "", "## Provenance", "",
                  _markdown(provenance_table(provenance, display)), ""]
    parts += ["Micro-F1 = 2·ΣTP / (2·ΣTP + ΣFP + ΣFN). For single-answer closed questions it equals accuracy "
              "(an unparseable answer is one false positive and one false negative). Cells read "
              "**closed / open (Δ = closed − open)**; the Random row gives the expected F1 of a uniform random "
              f"answer (closed / open). **Overall** is the {AVERAGING}, over the tasks shown; it is withheld (—) "
              "when a task's F1 is. " + options_text, ""]
    for template in TEMPLATES:
        if not any(s.template == template for s in report.scores):
            continue
        parts += [f"## Results — {TEMPLATE_TITLES[template]} template", "",
                  _markdown(results_table(report, template, display)), ""]
    for title, file_name in plots.items():
        parts += [f"## {title}", "", f"![{title}]({file_name})", ""]
    parts += ["## Scores with 95% bootstrap intervals", "", _markdown(ci_table(report, display)), ""]
    strict_assisted = strict_assisted_table(report, display)
    if len(strict_assisted):
        parts += ["## Closed answers: strict and assisted F1", "",
                  "Strict F1 is the paper's protocol: a reply the parser cannot read is wrong. Assisted F1 reads those "
                  "replies with the judge model's extraction prompt (`mmbu eval judge --extract-closed`; one option or "
                  "none) and is never mixed into the strict score; — means no extraction was run. The unparseable "
                  "share separates \"cannot follow the answer format\" from \"does not see\".", "",
                  _markdown(strict_assisted), ""]
    parts += [
              "## Parse failures and judge errors", "",
              "Parse failures are scored as wrong. Judge errors (no verdict: the judge failed or has not run) "
              "and run errors (no model answer) are left out of F1.", "",
              _markdown(diagnostics_table(report, display)), ""]
    if report.paired:
        parts += ["## Paired comparisons (per-record win / tie / loss)", "",
                  "Per record, the score is that record's F1 (1 or 0 for one-answer questions); only records "
                  "both models answered and that were scored for both count.", "",
                  _markdown(paired_table(report, display)), ""]
    if agreement:
        rows = pd.DataFrame([{"Run": a["run"], "First judge": a["first_judge"], "Second judge": a["second_judge"],
                              "Pairs": a["n"], "Cohen's kappa": _f(a["kappa"]), "Flip rate": _f(a["flip_rate"])}
                             for a in agreement])
        parts += ["## Judge agreement", "", _markdown(rows), ""]
    return "\n".join(parts) + "\n"
