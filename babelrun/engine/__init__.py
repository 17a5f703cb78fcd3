"""The engine: planned keys in, one log record per finished call out (``pipeline``), under
account rate limits and retries (``limits``), through provider batch APIs where a judge asks
(``batches``), with live counters (``state``) and a progress display (``progress``)."""

from .pipeline import FixedConcurrency, JudgeRunner, run
from .state import EngineResult, JudgeState

__all__ = ["EngineResult", "FixedConcurrency", "JudgeRunner", "JudgeState", "run"]
