"""Build a tiny random-weight causal LM and tokenizer that `vllm serve` can load from a folder.

No model hub: the tokenizer is a byte-level BPE whose vocabulary and merges are generated
(printable ASCII characters, then their pairs, then triples) until it holds `vocab_size`
tokens, so the grammar bitmask is as wide as a real model's (262,144 tokens = Gemma's, 8,192
int32 words per row). Only printable ASCII is in the vocabulary, never a lone non-ASCII byte:
a random model picks such bytes freely, they decode to nothing until a UTF-8 sequence
completes, and vLLM then streams a whole free output in one chunk, which hides TTFT and
inter-token gaps. Other bytes in a prompt become <|unk|>. Weights are drawn from a seed, so the
same spec always gives the same model.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import string
import tempfile
import time
from pathlib import Path

from gate.core.errors import GateError
from gate.plan.spec import TINY_MODEL_BUILD, TinyModelSpec

CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
SPECIAL_TOKENS = ["<|begin|>", "<|end|>", "<|pad|>", "<|unk|>", "<|user|>", "<|assistant|>",
                  "<|system|>"]


def spec_hash(spec: TinyModelSpec) -> str:
    return hashlib.sha256(spec.model_dump_json().encode()).hexdigest()[:12]


def _bpe_vocab_and_merges(vocab_size: int) -> tuple[dict[str, int], list[tuple[str, str]]]:
    # GPT-2's byte-to-symbol table, which the ByteLevel pre-tokenizer uses (space is 'Ġ').
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    symbol = bytes_to_unicode()
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for char in string.printable[:95] + "\t\n":
        vocab[symbol[ord(char)]] = len(vocab)
    printable = [symbol[ord(c)] for c in string.printable[:95]]
    pairs = list(itertools.product(printable, repeat=2))
    triples = ((a + b, c) for (a, b), c in itertools.product(pairs, printable))
    merges: list[tuple[str, str]] = []
    target = vocab_size
    for left, right in itertools.chain(pairs, triples):
        if len(vocab) >= target:
            break
        if left + right not in vocab:
            vocab[left + right] = len(vocab)
            merges.append((left, right))
    if len(vocab) < target:
        raise GateError(f"tiny model: cannot generate a vocabulary of {target} tokens")
    return vocab, merges


def build_tokenizer(vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab, merges = _bpe_vocab_and_merges(vocab_size)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<|unk|>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|begin|>",
        eos_token="<|end|>",
        pad_token="<|pad|>",
        unk_token="<|unk|>",
        additional_special_tokens=SPECIAL_TOKENS[4:],
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build(spec: TinyModelSpec, out: Path) -> Path:
    """Write the model and tokenizer to `out` (atomically: a half-built folder never appears)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        tokenizer = build_tokenizer(spec.vocab_size)
        config = LlamaConfig(
            vocab_size=spec.vocab_size,
            hidden_size=spec.hidden_size,
            intermediate_size=spec.intermediate_size,
            num_hidden_layers=spec.num_layers,
            num_attention_heads=spec.num_heads,
            num_key_value_heads=spec.num_heads,
            max_position_embeddings=spec.max_position_embeddings,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            tie_word_embeddings=False,
            torch_dtype="float32",  # a PretrainedConfig kwarg, not in LlamaConfig's signature
        )
        torch.manual_seed(spec.seed)
        model = LlamaForCausalLM(config)
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        (tmp / "gate-tiny-model.json").write_text(spec.model_dump_json(indent=1))
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def ensure(spec: TinyModelSpec, cache_dir: Path, log=print) -> Path:
    """The model folder for `spec` under `cache_dir` (Settings.cache_dir), built on first use."""
    folder = Path(cache_dir) / "models" / f"tiny-v{spec.vocab_size}-b{TINY_MODEL_BUILD}-{spec_hash(spec)}"
    if (folder / "gate-tiny-model.json").is_file():
        return folder
    log(f"building tiny model (vocab {spec.vocab_size:,}) in {folder} ...")
    start = time.monotonic()
    build(spec, folder)
    log(f"built tiny model in {time.monotonic() - start:.1f}s")
    return folder


def check_model_folder(path: str) -> None:
    """Fail early and clearly when a local model folder cannot be a model."""
    folder = Path(path)
    if not folder.exists():
        if "/" in path and not path.startswith((".", "/")) and path.count("/") == 1:
            return  # looks like a hub id (org/name); vLLM resolves it
        raise GateError(f"model folder {path} does not exist")
    if not folder.is_dir():
        raise GateError(f"model {path} is a file, not a model folder")
    config = folder / "config.json"
    if not config.is_file():
        raise GateError(f"{path} is not a model folder: it has no config.json")
    try:
        data = json.loads(config.read_text())
    except ValueError as exc:
        raise GateError(f"{config} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or "model_type" not in data:
        raise GateError(f"{config} has no model_type: not a transformers model config")
    has_weights = any(folder.glob("*.safetensors")) or any(folder.glob("*.bin"))
    if not has_weights:
        raise GateError(f"{path} is not a model folder: no *.safetensors or *.bin weights")
