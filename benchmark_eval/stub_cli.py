"""`mmbu eval serve-stub`: the bundled stand-in OpenAI-compatible server (`stub_server`), for a dry run without a GPU."""
from __future__ import annotations

import click

from mmbu.benchmark_eval.stub_server import FAMILIES, serve


@click.command("serve-stub")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="Port (0: any free one).")
@click.option("--model", "models", multiple=True,
              help="Serve only this model name, as vLLM does (repeatable; default: answer any name).")
@click.option("--family", type=click.Choice(["auto", *FAMILIES]), default="auto", show_default=True,
              help="Answer style; auto answers boxes in the convention the registry declares for the model asked.")
@click.option("--latency", type=click.FloatRange(0), default=0.0, show_default=True, help="Seconds every answer takes.")
def serve_stub(host: str, port: int, models: tuple[str, ...], family: str, latency: float) -> None:
    """Serve a stand-in model and judge on an OpenAI-compatible API until Ctrl-C: scripted
    answers, no GPU, meaningless scores. Try the whole path with it before a real server
    exists:

    \b
      mmbu eval serve-stub --port 8000 &
      mmbu eval run --release data/demo/release --model Qwen2.5-VL-7B \\
          --base-url http://127.0.0.1:8000/v1 --out runs/
      mmbu eval judge runs/Qwen__Qwen2.5-VL-7B-Instruct --judge-base-url http://127.0.0.1:8000/v1
    """
    serve(host=host, port=port, latency_s=latency, family=family, served_models=list(models) or None,
          announce=lambda url: click.echo(f"stand-in model server (scripted answers, no model) at {url}; Ctrl-C stops it",
                                          err=True))
