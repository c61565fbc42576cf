"""`priority-webhook review` on hostile files: a printed result (exit 0/1) or one clear error line (exit 2)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import strategies
from tests.fuzz.cli import assert_clear_error, parse_output, run
from tests.fuzz.oracle import CLASSES_YAML, assert_one_line
from tests.fuzz.runs import SAMPLE, fuzz

review_inputs = strategies.document_bytes(strategies.objects | strategies.admission_reviews)


@pytest.fixture(scope="module")
def classes_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("classes") / "classes.yaml"
    path.write_text(CLASSES_YAML)
    return str(path)


@pytest.fixture(scope="module")
def input_file(tmp_path_factory):
    return tmp_path_factory.mktemp("input") / "input.yaml"


def check_review(content: bytes, fmt: str, classes_file: str, input_file) -> None:
    input_file.write_bytes(content)
    outcome = run(["review", str(input_file), "--classes", classes_file, "-o", fmt])
    if outcome.code == 2:
        assert_clear_error(outcome, "review")
        return
    assert outcome.code in (0, 1), outcome
    if outcome.out:
        printed = parse_output(outcome.out, fmt)
        assert isinstance(printed, dict) and "kind" in printed
    if outcome.code == 1:  # a denial: kubectl's one line per denied object on stderr
        denials = [
            line for line in outcome.err.splitlines() if line.startswith(("Error from server", "The "))
        ]
        assert denials, outcome.err[:300]
        for line in denials:
            assert_one_line(line, bound=None)


@SAMPLE
@given(content=review_inputs, fmt=st.sampled_from(["json", "yaml"]))
def test_review_cli_sample(content, fmt, classes_file, input_file):
    check_review(content, fmt, classes_file, input_file)


@pytest.mark.fuzz
@pytest.mark.timeout(1200)
@fuzz(3000)
@given(content=review_inputs, fmt=st.sampled_from(["json", "yaml"]))
def test_review_cli_fuzz(content, fmt, classes_file, input_file):
    check_review(content, fmt, classes_file, input_file)
