"""The built-in JSON schemas of guided requests, by name (`workload.json_schema: inventory`).

Every one is bounded everywhere (string lengths, integer ranges, enums, array sizes), so that
every output ends well inside max_tokens even from a random-weight model, and the grammar
alone fixes how long an output can be (gate.plan.workload.output_length_bounds).
"""

from __future__ import annotations

from typing import Any

# Short outputs (about 30-50 tokens): the CPU plan, where prefill and decode cost alike.
PERSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "city": {"type": "string", "enum": ["Paris", "Lima", "Oslo", "Kyoto", "Accra"]},
        "tags": {
            "type": "array",
            "items": {"type": "string", "enum": ["a", "b", "c"]},
            "maxItems": 3,
        },
    },
    "required": ["name", "age", "city", "tags"],
    "additionalProperties": False,
}

_PRODUCT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sku": {"type": "string", "minLength": 10, "maxLength": 10},
        "name": {"type": "string", "minLength": 16, "maxLength": 24},
        "category": {"type": "string",
                     "enum": ["tools", "garden", "lighting", "plumbing", "paint", "hardware"]},
        "description": {"type": "string", "minLength": 72, "maxLength": 96},
        "quantity": {"type": "integer", "minimum": 0, "maximum": 9999},
        "price_cents": {"type": "integer", "minimum": 100, "maximum": 99999},
        "tags": {"type": "array", "minItems": 2, "maxItems": 3,
                 "items": {"type": "string", "enum": ["new", "sale", "eco", "bulk", "pro"]}},
        "in_stock": {"type": "boolean"},
    },
    "required": ["sku", "name", "category", "description", "quantity", "price_cents", "tags",
                 "in_stock"],
    "additionalProperties": False,
}

# The seed's shape (docs/background.md#the-workloads-shape): outputs of several hundred tokens,
# so that decode steps with a guided row in every slot fill the cells, not prefill. Exactly 8
# products and strings whose minimum lengths are at least three quarters of their maximum:
# every valid output is 2,066 to 2,504 characters whatever model writes it.
INVENTORY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": {"type": "string", "minLength": 120, "maxLength": 150},
        "items": {"type": "array", "minItems": 8, "maxItems": 8, "items": _PRODUCT},
    },
    "required": ["summary", "items"],
    "additionalProperties": False,
}

BUILTIN_SCHEMAS: dict[str, dict[str, Any]] = {
    "person": PERSON_SCHEMA,
    "inventory": INVENTORY_SCHEMA,
}
