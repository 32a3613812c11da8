"""Property-based fuzzing of every kind of file a user hands gpuplan (tests/helpers/fuzz_files.py says how
the hostile files are made): each command either answers or refuses in one bounded line with exit
2, never a traceback. Examples per kind: GPUPLAN_FUZZ_FILE_EXAMPLES (default 500: ~2,500 cases in
`make test`), derandomized so CI runs a fixed set; GPUPLAN_FUZZ_RANDOM=1 draws new ones.
bench/fuzz_files.py runs the long version."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.fuzz_files import KINDS, check_answer, draw_text, run

EXAMPLES = int(os.environ.get("GPUPLAN_FUZZ_FILE_EXAMPLES", "500"))
RANDOM = os.environ.get("GPUPLAN_FUZZ_RANDOM") == "1"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_seed_documents_are_answered(kind: str) -> None:
    """The unmutated seeds are real, valid files: the fuzzing starts from documents that work."""
    answer = run(KINDS[kind], KINDS[kind].write(KINDS[kind].seed))
    assert answer.code == 0, answer.stderr
    check_answer(answer)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_hostile_files_get_an_answer_or_one_line(kind: str) -> None:
    @settings(
        max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM, database=None,
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    @given(data=st.data())
    def case(data: st.DataObject) -> None:
        check_answer(run(KINDS[kind], draw_text(KINDS[kind], data)))

    case()
