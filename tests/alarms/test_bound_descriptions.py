"""The API's descriptions of each alarm bound say what the bound is valid for, since a client may
show the number on its own (docs/jobs_and_evidence.md §2)."""

from __future__ import annotations

from app.alarms.schemas import AnytimeBound, CheckEvidence, Confirmation


def _description(model: type, field: str) -> str:
    return model.model_fields[field].description or ""


def test_the_headline_bound_says_it_is_valid_across_runs_not_given_the_alarm() -> None:
    for model in (AnytimeBound, CheckEvidence):
        text = _description(model, "lower_bound")
        assert "valid across runs" in text.lower() and "not given the alarm" in text, model.__name__


def test_the_fresh_confirmation_says_it_is_valid_given_the_alarm() -> None:
    text = _description(Confirmation, "lower_bound")
    assert "valid given the alarm" in text and "not given" not in text
