"""TRACE answer contracts (../shared/CONTRACTS.md §1-4), standard library only.

    >>> from trace_tui.scoring import extract_answer, answers_match, trace_reward
    >>> ex = extract_answer('The bars differ by 42.\\n{"answer": 42}', "integer")
    >>> ex.status, ex.value, ex.route
    ('found', 42, 'balanced_object')
    >>> answers_match(ex.value, {"type": "integer", "value": 42})
    True
    >>> trace_reward('{"answer": 42}', {"type": "integer", "value": 42})
    1.0
"""

from __future__ import annotations

from .coercion import ANSWER_TYPES, normalize_answer_type
from .extraction import (
    AMBIGUOUS,
    CONTRACT_ID as EXTRACTION_CONTRACT_ID,
    FOUND,
    MISSING,
    ROUTE_ORDER,
    Candidate,
    Extraction,
    extract_answer,
)
from .judge import (
    JUDGE_BUDGETS,
    OWN_JUDGE_PROMPT,
    JudgeAttempt,
    JudgePrompt,
    JudgeResult,
    JudgeVerdict,
    check_judge_output,
    judge_messages,
    judge_with_retries,
    parse_judge_output,
    ValidationRowScore,
    score_validation_row,
)
from .match import CONTRACT_ID as MATCH_CONTRACT_ID, answers_match, canonical
from .parsing import parse_structured
from .reward import reward_answer, reward_components, trace_reward

__all__ = [
    "AMBIGUOUS", "ANSWER_TYPES", "Candidate", "EXTRACTION_CONTRACT_ID", "Extraction", "FOUND", "JUDGE_BUDGETS",
    "OWN_JUDGE_PROMPT", "JudgeAttempt", "JudgePrompt", "JudgeResult", "JudgeVerdict", "MATCH_CONTRACT_ID",
    "MISSING", "ROUTE_ORDER", "answers_match", "canonical", "check_judge_output", "extract_answer", "judge_messages",
    "judge_with_retries", "normalize_answer_type", "parse_judge_output", "parse_structured", "reward_answer",
    "reward_components", "score_validation_row", "trace_reward", "ValidationRowScore",
]
