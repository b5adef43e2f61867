"""The evaluation as a Python API: run_eval, run_judge, run_score and run_report take one config each and return
what the commands print, without click (the commands are thin wrappers over them)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.eval_release import write_release
from support.openai_server import OpenAIServer

from mmbu.benchmark_eval.judge.api import JudgeConfig, run_judge
from mmbu.benchmark_eval.release import ReleaseError
from mmbu.benchmark_eval.report.api import ReportConfig, run_report
from mmbu.benchmark_eval.runner.api import EvalConfig, EvalUsageError, run_eval
from mmbu.benchmark_eval.scoring.api import ScoreConfig, run_score
from mmbu.cli import cli
from mmbu.core.cli import ExitCode

MODEL = "Qwen/Qwen2.5-VL-7B-Instruct"


def judge_reply(call) -> str:
    return "They differ.\nVERDICT: NOT_EQUIVALENT"


@pytest.fixture(scope="module")
def release_dir(tmp_path_factory):
    return write_release(tmp_path_factory.mktemp("release"), count=2)


def test_run_judge_score_report_from_python(release_dir, tmp_path):
    runs = tmp_path / "runs"
    seen = []
    with OpenAIServer(families={MODEL: "qwen25"}) as server:
        config = EvalConfig(release_dir=release_dir, runs_dir=runs, model=MODEL, base_urls=(server.url,),
                            timeout=5, retry_backoff=0.01, command_line=("notebook", "cell 3"))
        report = run_eval(config, on_progress=lambda progress: seen.append(progress.done))
    assert report.exit_code == ExitCode.OK and report.ok == report.expected == 4 * 2 * 2 * 3
    assert seen[-1] == report.expected and report.predictions.is_file()
    assert json.loads((report.run_dir / "completeness.json").read_text())["configs"] == report.completeness
    assert json.loads((report.run_dir / "run.json").read_text())["invocations"][-1]["command_line"] == [
        "notebook", "cell 3"]

    with OpenAIServer(responder=judge_reply) as judge:
        judged = run_judge(JudgeConfig(run_dir=report.run_dir, judge_base_url=judge.url))
    assert judged.exit_code == ExitCode.OK and judged.summaries[0].judged > 0
    assert json.loads((report.run_dir / "judge.json").read_text())["judge_model"] == "Qwen/Qwen3-32B"

    scored = run_score(ScoreConfig(run_dirs=(report.run_dir,), out=tmp_path / "scores.json", resamples=50))
    assert scored.exit_code == ExitCode.OK and not scored.incomplete
    # one model and no --by: no paired comparisons, no breakdowns, and no empty file for either
    assert set(scored.written) == {"scores", "overall", "provenance", "diagnostics", "records"}
    assert all(path.is_file() for path in scored.written.values())
    # the command writes the same scores for the same inputs
    result = CliRunner().invoke(cli, ["eval", "score", str(report.run_dir), "--out", str(tmp_path / "cli.json"),
                                      "--resamples", "50"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "cli.json").read_bytes() == scored.written["scores"].read_bytes()
    # `--out folder/` names a folder (a trailing separator, or one that exists): scores.json goes inside it
    (tmp_path / "existing").mkdir()
    for folder in (f"{tmp_path / 'new'}/", str(tmp_path / "existing")):
        result = CliRunner().invoke(cli, ["eval", "score", str(report.run_dir), "--out", folder, "--resamples", "50"],
                                    catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert (Path(folder) / "scores.json").read_bytes() == scored.written["scores"].read_bytes()

    reported = run_report(ReportConfig(run_dirs=(report.run_dir,), out_dir=tmp_path / "report", resamples=50))
    assert reported.exit_code == ExitCode.OK and reported.written["report.md"].read_text().startswith("#")
    assert {"scores.json", "deltas.csv", "records.parquet"} <= set(reported.written)


def test_bad_options_and_inputs_raise_one_sentence(release_dir, tmp_path):
    with pytest.raises(EvalUsageError, match="not in the registry.*give its box convention"):
        run_eval(EvalConfig(release_dir=release_dir, runs_dir=tmp_path, model="my-lab/unknown",
                            base_urls=("http://127.0.0.1:9/v1",)))
    with pytest.raises(EvalUsageError, match="unknown form 'multiple'"):
        run_eval(EvalConfig(release_dir=release_dir, runs_dir=tmp_path, model=MODEL, forms=("multiple",),
                            base_urls=("http://127.0.0.1:9/v1",)))
    single = write_release(tmp_path / "single", tasks=("ungrounded_classification",), count=1)
    with pytest.raises(ReleaseError, match="the release has no task object_detection"):
        run_eval(EvalConfig(release_dir=single, runs_dir=tmp_path, model=MODEL, tasks=("object_detection",),
                            base_urls=("http://127.0.0.1:9/v1",)))
    with pytest.raises(ValueError, match="must differ"):
        run_judge(JudgeConfig(run_dir=tmp_path, judge_base_url="http://127.0.0.1:9/v1",
                              second_judge_model="Qwen/Qwen3-32B"))
