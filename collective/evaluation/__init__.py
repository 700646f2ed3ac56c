"""`collective eval`: is the council worth it on my models?

Questions with gold answers, asked in several answer modes (arms) that share their work,
scored, and compared with one call.
"""

from collective.evaluation.questions import (
    EvalFileError,
    EvalQuestion,
    load_questions,
    resolve_gold,
)
from collective.evaluation.report import summarise, table
from collective.evaluation.run import DEFAULT_ARMS, EvalProgress, evaluate, run_eval
from collective.evaluation.scoring import score

__all__ = [
    "DEFAULT_ARMS",
    "EvalFileError",
    "EvalProgress",
    "EvalQuestion",
    "evaluate",
    "load_questions",
    "resolve_gold",
    "run_eval",
    "score",
    "summarise",
    "table",
]
