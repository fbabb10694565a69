"""The built-in schemas: each is bounded, so the grammar alone fixes how long an output runs,
and the GPU plans' inventory schema forces outputs of several hundred tokens."""

from __future__ import annotations

import json

from jsonschema import Draft202012Validator

from gate.plan.schemas import BUILTIN_SCHEMAS, INVENTORY_SCHEMA, PERSON_SCHEMA
from gate.plan.workload import output_length_bounds


def test_every_builtin_schema_is_valid_and_bounded():
    for name, schema in BUILTIN_SCHEMAS.items():
        Draft202012Validator.check_schema(schema)
        low, high = output_length_bounds(schema)
        assert high is not None and 0 < low <= high, name


def test_the_inventory_schema_forces_long_outputs_and_the_person_one_short():
    inv_low, inv_high = output_length_bounds(INVENTORY_SCHEMA)
    person_low, person_high = output_length_bounds(PERSON_SCHEMA)
    assert inv_low > 2000 and inv_high < 2600  # several hundred tokens whatever fills it
    assert person_high < 200


def test_the_bounds_hold_for_the_shortest_and_longest_valid_inventory():
    def product(short: bool) -> dict:
        n = (lambda lo, hi: lo) if short else (lambda lo, hi: hi)
        return {"sku": "A" * 10, "name": "n" * n(16, 24),
                "category": "tools" if short else "plumbing",
                "description": "d" * n(72, 96), "quantity": 0 if short else 9999,
                "price_cents": 100 if short else 99999,
                "tags": ["new"] * 2 if short else ["sale"] * 3, "in_stock": short}

    low, high = output_length_bounds(INVENTORY_SCHEMA)
    for short in (True, False):
        doc = {"summary": "s" * (120 if short else 150), "items": [product(short)] * 8}
        assert not list(Draft202012Validator(INVENTORY_SCHEMA).iter_errors(doc))
        text = json.dumps(doc, separators=(", ", ": "))
        assert low <= len(text) <= high
    assert len(json.dumps({"summary": "s" * 120, "items": [product(True)] * 8},
                          separators=(", ", ": "))) == low
