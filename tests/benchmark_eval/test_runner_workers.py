"""`mmbu eval run --workers N`: rows split across processes, one writer, same records, resumable."""
from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter

import psutil
from click.testing import CliRunner

from mmbu.benchmark_eval.records import latest_by_key, read_records
from mmbu.benchmark_eval.runner.cli import run
from mmbu.benchmark_eval.runner.workers import split_concurrency
from support.eval_release import write_release
from support.eval_subprocess import CTRL_C_AFTER_FIRST_APPEND, eval_run_command, wait_for_records
from support.openai_server import OpenAIServer

SLUG = "Qwen__Qwen3-VL-8B-Instruct"
FAST = ["--retry-backoff", "0.01", "--timeout", "5"]
VOLATILE = {"created_at", "latency_s"}   # differ between any two runs


def invoke(*args: str):
    return CliRunner().invoke(run, list(args), catch_exceptions=False)


def fork_servers(parent: psutil.Process) -> list[psutil.Process]:
    return [child for child in parent.children() if "multiprocessing.forkserver" in " ".join(child.cmdline())]


def spawned_workers(parent: psutil.Process) -> list[psutil.Process]:
    """The eval workers: forked by the fork server the eval process started (with the runner preloaded)."""
    return [worker for server in fork_servers(parent) for worker in server.children()]


def comparable(records):
    return sorted(json.dumps({k: v for k, v in r.model_dump(mode="json").items() if k not in VOLATILE}, sort_keys=True)
                  for r in records)


def test_concurrency_is_shared_evenly():
    assert split_concurrency(256, 2) == [128, 128]
    assert split_concurrency(10, 3) == [4, 3, 3]
    assert split_concurrency(2, 4) == [1, 1, 1, 1]     # every worker keeps at least one request in flight


def test_workers_write_the_same_records_as_one_process(tmp_path):
    release = write_release(tmp_path / "release", count=5)
    with OpenAIServer(latency_s=0.01, families={"Qwen/Qwen3-VL-8B-Instruct": "qwen3"}) as server:
        common = ["--release", str(release), "--model", "Qwen3-VL-8B", "--base-url", server.url, "--concurrency", "6",
                  *FAST]
        one = invoke(*common, "--out", str(tmp_path / "one"))
        three = invoke(*common, "--out", str(tmp_path / "three"), "--workers", "3")
        assert server.stats.max_in_flight <= 6
    assert one.exit_code == 0 and three.exit_code == 0, three.output
    records = read_records(tmp_path / "three" / SLUG / "predictions.jsonl")
    assert len(records) == 4 * 5 * 6 and max(Counter(r.key for r in records).values()) == 1
    assert comparable(records) == comparable(read_records(tmp_path / "one" / SLUG / "predictions.jsonl"))
    table = json.loads((tmp_path / "three" / SLUG / "completeness.json").read_text())["configs"]
    assert len(table) == 24 and all(c["ok"] == c["expected"] == 5 for c in table)
    manifest = json.loads((tmp_path / "three" / SLUG / "run.json").read_text())
    assert manifest["backend"]["workers"] == 3
    assert "120/120 ok" in three.output


def test_errors_are_recorded_by_workers_and_only_they_are_asked_again(tmp_path):
    release = write_release(tmp_path / "release", count=4, tasks=("ungrounded_classification",))
    with OpenAIServer() as server:
        server.inject("empty", count=2, match="Answer with a short phrase")
        server.inject("500", count=3)
        args = ["--release", str(release), "--model", "Qwen3-VL-8B", "--base-url", server.url, "--out", str(tmp_path),
                "--workers", "2", "--max-attempts", "3", *FAST]
        first = invoke(*args)
        assert first.exit_code == 1
        predictions = tmp_path / SLUG / "predictions.jsonl"
        records = read_records(predictions)
        assert len(records) == 24 and Counter(r.error_reason for r in records if r.status == "error") == {"empty_answer": 2}
        assert "error 2" in first.output and "retries 3" in first.output   # the parent shows the workers' counts
        asked = len(server.calls)
        second = invoke(*args)
        assert second.exit_code == 0 and len(server.calls) - asked == 2
    assert all(r.status == "ok" for r in latest_by_key(read_records(predictions)).values())


def test_a_bad_release_found_by_a_worker_is_bad_input(tmp_path):
    release = write_release(tmp_path / "release", count=2, tasks=("object_detection",), drop_column="target")
    with OpenAIServer() as server:
        result = invoke("--release", str(release), "--model", "Qwen3-VL-8B", "--base-url", server.url,
                        "--out", str(tmp_path / "runs"), "--workers", "2", *FAST)
    assert result.exit_code == 2
    assert "target" in result.output and "Traceback" not in result.output


def test_workers_need_the_openai_backend(tmp_path):
    release = write_release(tmp_path / "release", count=1)
    result = invoke("--release", str(release), "--model", "Qwen3-VL-8B", "--backend", "vllm", "--workers", "2",
                    "--out", str(tmp_path / "runs"))
    assert result.exit_code == 2 and "--workers needs the openai backend" in result.output


def test_a_worker_that_dies_ends_the_run_keeps_its_answers_and_the_rerun_completes(tmp_path):
    release = write_release(tmp_path / "release", count=8, tasks=("ungrounded_classification",))
    killed: list[int] = []

    def kill_a_worker_once(call):
        if not killed and len(server.calls) >= 12:
            worker = spawned_workers(psutil.Process())[0]
            killed.append(worker.pid)
            worker.kill()
        return "A"

    with OpenAIServer(latency_s=0.01) as server:
        server.responder = kill_a_worker_once
        args = ["--release", str(release), "--model", "Qwen3-VL-8B", "--base-url", server.url, "--out", str(tmp_path),
                "--workers", "2", "--concurrency", "2", *FAST]
        first = invoke(*args)
        assert killed and first.exit_code == 1
        assert "eval worker" in first.output and "re-run the same command to resume" in first.output
        predictions = tmp_path / SLUG / "predictions.jsonl"
        kept = read_records(predictions)                          # whole lines only: the file reads cleanly
        assert 0 < len(kept) < 48
        server.responder = None
        second = invoke(*args)
        assert second.exit_code == 0, second.output
    records = read_records(predictions)
    assert len(latest_by_key(records)) == 48 and max(Counter(r.key for r in records).values()) == 1


def test_killing_the_parent_stops_its_workers_and_the_run_resumes(tmp_path):
    release = write_release(tmp_path / "release", count=12, tasks=("ungrounded_classification",))
    predictions = tmp_path / "runs" / SLUG / "predictions.jsonl"
    # 0.2 s per answer: the 60 answers left after the 12th take >= 3 s, so a loaded machine that starves this
    # process between the 12th record and the Ctrl-C still interrupts a run in progress (at 0.05 s it could finish)
    with OpenAIServer(latency_s=0.2) as server:
        command = eval_run_command(release, server.url, tmp_path / "runs", "--concurrency", "4", "--workers", "2", *FAST)
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_for_records(predictions, 12)
        servers = fork_servers(psutil.Process(process.pid))
        workers = spawned_workers(psutil.Process(process.pid))
        assert len(workers) == 2 and len(servers) == 1
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        # the fork server ends with the eval process, and each worker notices within a second
        gone, alive = psutil.wait_procs(workers + servers, timeout=10)
        assert not alive
        written = predictions.read_bytes().count(b"\n")
        assert 12 <= written < 72
        finished = subprocess.run(command, capture_output=True, timeout=120)
        assert finished.returncode == 0, finished.stderr.decode()[-2000:]
    records = read_records(predictions)
    keys = Counter(r.key for r in records)
    assert len(keys) == 72 and max(keys.values()) == 1


def test_more_workers_than_rows_is_fine(tmp_path):
    release = write_release(tmp_path / "release", count=2, tasks=("ungrounded_classification",))
    with OpenAIServer() as server:
        result = invoke("--release", str(release), "--model", "Qwen3-VL-8B", "--base-url", server.url,
                        "--out", str(tmp_path), "--workers", "4", *FAST)
    assert result.exit_code == 0, result.output
    assert len(read_records(tmp_path / SLUG / "predictions.jsonl")) == 12


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_every_process_keeps_whole_answers_and_the_run_resumes(tmp_path):
    release = write_release(tmp_path / "release", count=12, tasks=("ungrounded_classification",))
    predictions = tmp_path / "runs" / SLUG / "predictions.jsonl"
    # 0.2 s per answer, as in the kill test above: the answers left after the 12th take >= 1.5 s
    with OpenAIServer(latency_s=0.2) as server:
        command = eval_run_command(release, server.url, tmp_path / "runs", "--concurrency", "4", "--workers", "2", *FAST)
        # its own process group, as a terminal would make it: Ctrl-C reaches the parent and its workers. SIGINT is
        # set back to its default first: a shell starts background jobs with it ignored, Python then keeps ignoring
        # it, and a suite launched with `make test &` saw the run finish undisturbed (exit 0)
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                   preexec_fn=_default_sigint)
        wait_for_records(predictions, 12)
        workers = spawned_workers(psutil.Process(process.pid))
        os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
        said = stderr.decode()
        assert process.returncode == 130 and "Traceback" not in said, said[-2000:]  # 130: Ctrl-C, not "items failed"
        assert "interrupted (Ctrl-C)" in said and "answers ok" in said and "mmbu eval run" in said
        _, alive = psutil.wait_procs(workers, timeout=10)
        assert not alive
        kept = read_records(predictions)
        assert 12 <= len(kept) < 72 and predictions.read_bytes().endswith(b"\n")
        finished = subprocess.run(command, capture_output=True, timeout=120)
        assert finished.returncode == 0, finished.stderr.decode()[-2000:]
    records = read_records(predictions)
    assert len({r.key for r in records}) == 72
    # an answer kept before Ctrl-C is never asked again; only a request that failed (a timeout on a loaded
    # machine, say) is asked again, and its new record follows the error record (append-only)
    ok_keys = Counter(r.key for r in records if r.status == "ok")
    assert max(ok_keys.values()) == 1 and len(ok_keys) == 72


def test_ctrl_c_right_after_an_append_keeps_each_answer_once_and_the_resume_asks_only_the_rest(tmp_path):
    # The parent appends a group of answers and fsyncs; a Ctrl-C that lands during the fsync used to raise after the
    # append but before the group left the parent's held list, and the stop appended it a second time (the flaky
    # "two ok records per key" of the Ctrl-C test above). Here the signal is sent from inside that fsync, every time.
    release = write_release(tmp_path / "release", count=12, tasks=("ungrounded_classification",))
    predictions = tmp_path / "runs" / SLUG / "predictions.jsonl"
    with OpenAIServer(latency_s=0.05) as server:
        args = (release, server.url, tmp_path / "runs", "--concurrency", "4", "--workers", "2", *FAST)
        interrupted = subprocess.run(eval_run_command(*args, prelude=CTRL_C_AFTER_FIRST_APPEND), capture_output=True,
                                     timeout=120, start_new_session=True, preexec_fn=_default_sigint)
        stderr = interrupted.stderr.decode()
        assert interrupted.returncode == 130 and "Traceback" not in stderr, stderr[-2000:]
        kept = read_records(predictions)
        assert kept and max(Counter(r.key for r in kept).values()) == 1
        finished = subprocess.run(eval_run_command(*args), capture_output=True, timeout=120)
        assert finished.returncode == 0, finished.stderr.decode()[-2000:]
    records = read_records(predictions)
    ok_keys = Counter(r.key for r in records if r.status == "ok")
    assert len(ok_keys) == 72 and max(ok_keys.values()) == 1
    assert records[:len(kept)] == kept          # append-only: the kept answers are where they were, unchanged


def test_a_run_resumes_with_another_number_of_workers(tmp_path):
    release = write_release(tmp_path / "release", count=6, tasks=("ungrounded_classification",))
    with OpenAIServer() as server:
        args = ["--release", str(release), "--model", "Qwen3-VL-8B", "--base-url", server.url, "--out", str(tmp_path),
                *FAST]
        assert invoke(*args, "--workers", "2", "--limit", "3").exit_code == 0
        assert len(server.calls) == 18
        third = invoke(*args, "--workers", "3")
        assert third.exit_code == 0 and len(server.calls) == 36     # only the 3 new rows x 6 configurations
        assert "skipped 18" in third.output
        assert invoke(*args).exit_code == 0 and len(server.calls) == 36  # one process: nothing left to ask
    records = read_records(tmp_path / SLUG / "predictions.jsonl")
    assert len(records) == 36 and max(Counter(r.key for r in records).values()) == 1
