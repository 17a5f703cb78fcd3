"""The engine: planned keys in, one log record per finished call out (``pipeline``), under
account rate limits and retries (``limits``), through provider batch APIs where a judge asks
(``batches``), with live counters (``state``) and a progress display (``progress``)."""

from .limits import CallLimits, FixedConcurrency
from .pipeline import JudgeRunner, RunOptions, run, runner
from .state import EngineResult, JudgeState

__all__ = ["CallLimits", "EngineResult", "FixedConcurrency", "JudgeRunner", "JudgeState", "RunOptions", "run", "runner"]
