"""How long the guided outputs ran: completed guided requests of measured cells only."""

from __future__ import annotations

import pytest

from gate.measure.output_shape import guided_output_shape
from gate.measure.results import RequestRecord


def record(index, phase="sweep", arm="guided", tokens=10, text="x" * 30, error=None):
    return RequestRecord(index=index, phase=phase, arm=arm, concurrency=4, send_s=0.0,
                         output_tokens=tokens, text=text, error=error,
                         http_status=None if error else 200)


def test_only_completed_guided_requests_of_measured_cells_count():
    records = [record(0, tokens=10, text="a" * 20), record(1, tokens=30, text="b" * 40),
               record(2, phase="warmup", tokens=999), record(3, arm="free", tokens=999),
               record(4, tokens=999, error="HTTP 500")]
    shape = guided_output_shape(records)
    assert shape is not None and shape.requests == 2
    assert shape.mean_tokens == pytest.approx(20) and shape.mean_chars == pytest.approx(30)


def test_no_guided_output_is_no_shape():
    assert guided_output_shape([record(0, arm="free")]) is None
