"""The loopback OpenAI-compatible server of the tests: the toolkit's own stand-in server
(`mmbu.benchmark_eval.stub_server`, also `mmbu eval serve-stub`), re-exported under its old name.

Run ``python tests/support/openai_server.py --latency 0.05`` to serve from its own process (the benchmark does).
"""
from mmbu.benchmark_eval.stub_server import (  # noqa: F401
    FAMILIES, MALFORMED, ChatCall, Fault, OpenAIServer, bright_object_box, completion_body, convert_box, main,
    parse_call, scripted_answer,
)

if __name__ == "__main__":  # pragma: no cover
    main()
