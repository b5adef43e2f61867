"""The runner: ask a model every selected question of a release, append run records, resume."""
from mmbu.benchmark_eval.runner.core import (Progress, RunConfig, Runner, RunOutcome, completeness, model_fingerprint,
                                             request_hash)

__all__ = ["Progress", "RunConfig", "RunOutcome", "Runner", "completeness", "model_fingerprint", "request_hash"]
