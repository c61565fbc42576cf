"""AdmissionReview in, AdmissionReview out: the one code path shared by the server, `review` and tests."""

from webhook.review.handler import MalformedReview, Stage, handle_review

__all__ = ["MalformedReview", "Stage", "handle_review"]
