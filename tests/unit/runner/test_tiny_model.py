import json

import pytest

from gate.core.errors import GateError
from gate.plan.spec import TinyModelSpec
from gate.runner.tiny_model import build, build_tokenizer, check_model_folder

TEXT = '{"name": "Ann", "age": 37, "tags": ["a", "b"]}\n\tok'


def test_tokenizer_has_the_asked_vocabulary_and_round_trips_ascii():
    tok = build_tokenizer(5000)
    assert len(tok) == 5000
    assert tok.decode(tok.encode(TEXT, add_special_tokens=False)) == TEXT


def test_every_token_decodes_to_printable_text_on_its_own():
    """A lone non-ASCII byte would decode to nothing and make vLLM bunch a stream."""
    tok = build_tokenizer(3000)
    specials = set(tok.all_special_ids)
    for token_id in range(len(tok)):
        if token_id in specials:
            continue
        text = tok.decode([token_id])
        assert text and all(c.isprintable() or c in "\t\n" for c in text), (token_id, text)


def test_non_ascii_input_becomes_unk_not_an_error():
    tok = build_tokenizer(1000)
    assert tok.unk_token_id in tok.encode("é", add_special_tokens=False)


def test_chat_template_renders():
    tok = build_tokenizer(1000)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                   add_generation_prompt=True)
    assert text == "<|user|>\nhi\n<|assistant|>\n"


def test_build_is_deterministic_and_a_loadable_folder(tmp_path):
    spec = TinyModelSpec(vocab_size=2048, hidden_size=32, intermediate_size=64, num_heads=2)
    a, b = build(spec, tmp_path / "a"), build(spec, tmp_path / "b")
    check_model_folder(str(a))
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    config = json.loads((a / "config.json").read_text())
    assert config["vocab_size"] == 2048 and config["model_type"] == "llama"
    other = build(spec.model_copy(update={"seed": 1}), tmp_path / "c")
    assert (other / "model.safetensors").read_bytes() != (a / "model.safetensors").read_bytes()


@pytest.mark.parametrize("setup, message", [
    (lambda p: None, "does not exist"),
    (lambda p: p.write_text("x"), "is a file, not a model folder"),
    (lambda p: p.mkdir(), "it has no config.json"),
    (lambda p: (p.mkdir(), (p / "config.json").write_text("{")), "not valid JSON"),
    (lambda p: (p.mkdir(), (p / "config.json").write_text("{}")), "has no model_type"),
    (lambda p: (p.mkdir(), (p / "config.json").write_text('{"model_type": "llama"}')),
     "no *.safetensors or *.bin weights"),
])
def test_a_folder_that_is_not_a_model_is_refused_with_the_reason(tmp_path, setup, message):
    folder = tmp_path / "m"
    setup(folder)
    with pytest.raises(GateError, match=message.replace("*", r"\*")):
        check_model_folder(str(folder))
