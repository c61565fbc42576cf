"""Hostile workloads: `review` prints, denies or names the problem in one line; the server path answers or
refuses the body as malformed, never crashes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import strategies
from tests.fuzz.oracle import CLASSES, assert_one_line, assert_review_answer
from tests.fuzz.runs import SAMPLE, fuzz
from tests.fuzz.test_cli_fuzz import check_review, classes_file, input_file  # noqa: F401 (fixtures)
from webhook.objects.workloads import WORKLOADS, with_template
from webhook.review import MalformedReview, Stage, handle_review


@st.composite
def workloads_of_valid_shape(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(sorted(WORKLOADS)))
    group = WORKLOADS[kind][0]
    pod = draw(strategies.pods)
    template = {"metadata": {k: v for k, v in pod["metadata"].items() if k == "annotations"}}
    if "spec" in pod:
        template["spec"] = pod["spec"]
    base = {
        "apiVersion": f"{group}/v1" if group else "v1",
        "kind": kind,
        "metadata": {k: v for k, v in pod["metadata"].items() if k in ("name", "namespace")},
    }
    return with_template(base, kind, template)


workloads = workloads_of_valid_shape() | strategies.damaged(workloads_of_valid_shape())


def as_review(obj: Any, operation: str) -> dict[str, Any]:
    kind = obj.get("kind") if isinstance(obj, dict) else None
    kind = kind if isinstance(kind, str) and kind in WORKLOADS else "Deployment"
    group, resource, _ = WORKLOADS[kind]
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u",
            "resource": {"group": group, "version": "v1", "resource": resource},
            "operation": operation,
            "namespace": "shop",
            "object": obj,
            "oldObject": obj if operation == "UPDATE" else None,
        },
    }


def check_handler(obj: Any, operation: str, stage: Stage) -> None:
    body = as_review(obj, operation)
    try:
        answer, _, _ = handle_review(body, stage, CLASSES)
    except MalformedReview as err:
        assert_one_line(str(err))
        return
    assert_review_answer(body, answer, patch_allowed=False)
    assert "patch" not in answer["response"]


@SAMPLE
@given(obj=workloads, operation=st.sampled_from(["CREATE", "UPDATE"]), stage=st.sampled_from(Stage))
def test_workload_reviews_sample(obj, operation, stage):
    check_handler(obj, operation, stage)


@SAMPLE
@given(content=strategies.document_bytes(workloads), fmt=st.sampled_from(["json", "yaml"]))
def test_review_cli_on_workloads_sample(content, fmt, classes_file, input_file):  # noqa: F811
    check_review(content, fmt, classes_file, input_file)


@pytest.mark.fuzz
@pytest.mark.timeout(1200)
@fuzz(2000)
@given(content=strategies.document_bytes(workloads), fmt=st.sampled_from(["json", "yaml"]))
def test_review_cli_on_workloads_fuzz(content, fmt, classes_file, input_file):  # noqa: F811
    check_review(content, fmt, classes_file, input_file)
