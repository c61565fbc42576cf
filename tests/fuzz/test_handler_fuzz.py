"""`handle_review` on hostile AdmissionReviews: an answer for the request's version, or MalformedReview."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import strategies
from tests.fuzz.oracle import CLASSES, assert_one_line, assert_review_answer
from tests.fuzz.runs import SAMPLE, fuzz
from webhook.review import MalformedReview, Stage, handle_review

bodies = strategies.admission_reviews | strategies.hostile_values


def check(body: Any, stage: Stage) -> None:
    try:
        answer, _, _ = handle_review(body, stage, CLASSES)
    except MalformedReview as err:
        assert_one_line(str(err))
        return
    assert_review_answer(body, answer, patch_allowed=stage is not Stage.VALIDATE)


@SAMPLE
@given(body=bodies, stage=st.sampled_from(Stage))
def test_handle_review_sample(body, stage):
    check(body, stage)


@pytest.mark.fuzz
@pytest.mark.timeout(1200)
@fuzz(4000)
@given(body=bodies, stage=st.sampled_from(Stage))
def test_handle_review_fuzz(body, stage):
    check(body, stage)
