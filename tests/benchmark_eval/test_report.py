"""The report: the paper's table shape, the random row, plots with gaps, resampling by image."""
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))

from eval_run_factory import make_record, write_run  # noqa: E402
from support.eval_release import write_release  # noqa: E402

from mmbu.benchmark_eval.release import load_samples
from mmbu.benchmark_eval.report.api import write_report
from mmbu.benchmark_eval.report.plots import heatmap_by_field
from mmbu.benchmark_eval.report.tables import results_table
from mmbu.benchmark_eval.scoring.scores import ScoreOptions, score_outcomes, score_runs

UNG = "ungrounded_classification"


def outcome_rows(model, form, results, sub_modalities, options=5):
    """Hand-made per-record outcomes: `results` is 1 (right) / 0 (wrong) per sample."""
    rows = []
    for index, (right, sub) in enumerate(zip(results, sub_modalities)):
        rows.append({"model": model, "task": UNG, "form": form, "template": "no_context", "sample_id": f"s{index}",
                     "status": "ok", "scored": True, "tp": right, "fp": 1 - right, "fn": 1 - right,
                     "parse_ok": True, "parse_path": "response:label", "judge_state": "n/a",
                     "random_p": 1 / options if form == "closed" else 0.25, "n_gold": 1, "sub_modality": sub,
                     "image_sha256": f"img{index // 2}"})
    return rows


@pytest.fixture
def report():
    subs = ["CT", "CT", "MRI", "MRI"]
    rows = (outcome_rows("model-a", "closed", [1, 1, 1, 0], subs) + outcome_rows("model-a", "open", [1, 0, 0, 0], subs)
            + outcome_rows("model-b", "closed", [1, 0, 0, 0], ["CT"] * 4) + outcome_rows("model-b", "open", [0, 0, 0, 0], ["CT"] * 4))
    return score_outcomes(pd.DataFrame(rows), ScoreOptions(resamples=100, by=("sub_modality",)))


def test_results_table_has_the_papers_shape(report):
    table = results_table(report, "no_context", display=str.upper)
    assert list(table.columns) == ["Model", "Ungrounded classification", "Overall"]
    assert table["Model"].tolist() == ["MODEL-A", "MODEL-B", "Random"]
    # model-a: closed 3/4, open 1/4, delta 0.5; model-b: 1/4, 0, 0.25
    assert table["Ungrounded classification"].tolist() == ["0.750 / 0.250 (0.500)", "0.250 / 0.000 (0.250)",
                                                           "0.200 / 0.250"]
    assert table["Overall"].tolist() == table["Ungrounded classification"].tolist()  # one task: its own mean


def test_heatmap_leaves_a_gap_where_a_model_has_no_records(report, tmp_path):
    path = heatmap_by_field(report.outcomes, "sub_modality", "closed", str, tmp_path / "heatmap.png")
    with Image.open(path) as image:
        pixels = np.asarray(image.convert("RGB")).astype(int)
    # the grey "no records" cell (model-b has no MRI records) is drawn
    grey = (np.abs(pixels - 0xdd) <= 2).all(axis=2)
    assert grey.sum() > 500


def test_write_report_files(report, tmp_path):
    written = write_report(report, tmp_path / "report", (), ScoreOptions(resamples=100))
    markdown = written["report.md"].read_text()
    assert "## Results — No Context template" in markdown and "| Random | 0.200 / 0.250 |" in markdown
    assert "## Paired comparisons" in markdown
    assert pd.read_csv(written["scores.csv"]).shape[0] == 4
    assert pd.read_csv(written["paired.csv"])["wins"].tolist()[0] == 3  # model-a beats model-b on 3 records


def test_resampling_by_image(tmp_path):
    release = write_release(tmp_path / "release", tasks=(UNG,), count=8)
    shard = next((release / "data" / UNG).glob("*.parquet"))
    table = pq.read_table(shard)
    ids = table.column("sample_id").to_pylist()
    # questions 0-3 share one image, 4-7 another
    table = table.append_column("image_sha256", pc.cast(pc.if_else(pc.is_in(table.column("sample_id"),
                                value_set=table.column("sample_id").slice(0, 4)), "image-1", "image-2"), "string"))
    pq.write_table(table, shard)
    gold = load_samples(release, UNG).set_index("sample_id")
    records = []
    for index, sample in enumerate(ids):
        right = "ABCDE"[list(gold.loc[sample, "options"]).index(gold.loc[sample, "answer"])]
        wrong = next(l for l in "ABCDE" if l != right)
        records.append(make_record(sample, UNG, "closed", "no_context", right if index < 4 else wrong, "m"))
    run_dir = write_run(tmp_path / "runs", "m", release, records)
    flat = score_runs([run_dir], options=ScoreOptions(resamples=300)).scores[0]
    clustered = score_runs([run_dir], options=ScoreOptions(resamples=300, cluster_by_image=True)).scores[0]
    assert flat.f1 == clustered.f1 == 0.5
    # two images, one all right, one all wrong: a resample of images scores 0, 0.5 or 1
    assert (clustered.ci_low, clustered.ci_high) == (0.0, 1.0)
    assert flat.ci_high - flat.ci_low < 1.0


def test_report_shows_judge_agreement(report, tmp_path):
    import json

    run_dir = tmp_path / "runs" / "model-a"
    run_dir.mkdir(parents=True)
    (run_dir / "judge_agreement.json").write_text(json.dumps(
        {"first_judge": "Qwen/Qwen3-32B", "second_judge": "gpt-4.1-mini", "prompt_version": "mmbu-judge-v1",
         "n": 50, "kappa": 0.4, "flip_rate": 0.3, "agree": 35, "first_only_equivalent": 5, "second_only_equivalent": 10}))
    written = write_report(report, tmp_path / "report", (run_dir,), ScoreOptions(resamples=100))
    markdown = written["report.md"].read_text()
    assert "## Judge agreement" in markdown
    assert "| model-a | Qwen/Qwen3-32B | gpt-4.1-mini | 50 | 0.400 | 0.300 |" in markdown


def test_f1_plot_tells_a_zero_score_from_no_score(tmp_path):
    from mmbu.benchmark_eval.report.plots import NO_SCORE_COLOUR, f1_by_config
    from mmbu.benchmark_eval.scoring.results import ConfigScore

    scores = [replace(ConfigScore.unscored("m", UNG, "closed", "no_context"), n=4, f1=0.0, ci_low=0.0, ci_high=0.0)]
    path = f1_by_config(scores, pd.DataFrame(), str, tmp_path / "f1.png", baselines={})
    with Image.open(path) as image:
        pixels = np.asarray(image.convert("RGB")).astype(int)
    height, width = pixels.shape[:2]
    lower = pixels[height // 2:]  # below the legend, where bars stand on the axis
    red, green, blue = lower[..., 0], lower[..., 1], lower[..., 2]
    bluish = (blue > 150) & (blue - red > 60)  # tab10's first colour, the model's, antialiased
    assert bluish.sum() >= 100, "an F1 of 0 is drawn as a line above the axis"
    # closed Modality and Full Context (between the bar and the closed/open separator) say "no score"
    spine = int(np.argmax((lower.sum(axis=2) == 0).sum(axis=1)))  # the x axis: the row with the most black
    middle = lower[:spine, int(width * 0.2):int(width * 0.45)]  # above the tick labels
    grey = (np.abs(middle - int(NO_SCORE_COLOUR[1:3], 16)) <= 40).all(axis=2) & (middle.std(axis=2) < 4)
    assert grey.sum() >= 60, "configurations without a score say so"
