"""What every answer to hostile input must look like: a well-formed response, or one clear line of error."""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonpatch

from webhook.policy.class_model import SYSTEM_CLASSES, ClassSet, PriorityClass

# The classes the fuzzed inputs name (see strategies.CLASS_NAMES): a default, a Never class, system ones.
CLASSES = ClassSet(
    [
        *SYSTEM_CLASSES,
        PriorityClass("high", 1000),
        PriorityClass("low", 10, global_default=True),
        PriorityClass("never", 500, preemption_policy="Never"),
    ]
)
CLASSES_YAML = "".join(
    "---\n" + json.dumps(pc.to_object()) + "\n"
    for pc in CLASSES.values()
    if not pc.name.startswith("system-")
)
# A one-line error that echoes a whole huge input is not "clear"; the longest legitimate line is a denial
# quoting a long class name (upstream echoes it too), so this bound only catches dumps of whole documents.
MAX_ERROR_CHARS = 4096


def assert_one_line(message: Any, *, bound: int | None = MAX_ERROR_CHARS) -> None:
    assert isinstance(message, str) and message.strip(), f"empty error message: {message!r}"
    assert "\n" not in message and "\r" not in message, f"error spans lines: {message[:300]!r}"
    assert "Traceback" not in message, message[:300]
    if bound is not None:
        assert len(message) <= bound, f"error is {len(message)} chars: {message[:200]!r}..."


def assert_review_answer(body: Any, answer: Any, *, patch_allowed: bool = True) -> None:
    """`answer` is the AdmissionReview response for `body`: same version, uid echoed, coherent fields."""
    assert isinstance(answer, dict), answer
    json.dumps(answer, allow_nan=False)  # serialisable as strict JSON
    assert answer["apiVersion"] == body["apiVersion"]
    assert answer["kind"] == "AdmissionReview"
    response = answer["response"]
    request = body["request"]
    assert response["uid"] == request["uid"]
    assert isinstance(response["allowed"], bool)
    if "patch" in response:
        assert patch_allowed, "a validating webhook must not return a patch"
        assert response["patchType"] == "JSONPatch"
        ops = json.loads(base64.b64decode(response["patch"], validate=True))
        assert isinstance(ops, list) and ops
        # The API server applies the patch to the object it sent; it must apply cleanly.
        jsonpatch.apply_patch(request["object"], ops)
    if response["allowed"]:
        assert "status" not in response
    else:
        status = response["status"]
        assert status["code"] == 403 and status["reason"] == "Forbidden"
        assert isinstance(status["message"], str) and status["message"]
    for warning in response.get("warnings", []):
        assert isinstance(warning, str)
