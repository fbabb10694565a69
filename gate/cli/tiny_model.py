"""`gate tiny-model`: build the random-weight model and tokenizer folder the CPU plan serves."""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import ValidationError

from gate.core.files import invalid
from gate.core.settings import Settings
from gate.plan.spec import TinyModelSpec
from gate.runner import tiny_model


def add_parser(sub) -> None:
    p = sub.add_parser("tiny-model", help="build a tiny random-weight model + tokenizer folder")
    p.add_argument("--vocab", type=int, default=262_144, help="vocabulary size (default 262,144)")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True, help="folder to write")
    p.set_defaults(handler=handle)


def handle(args, settings: Settings) -> int:
    try:
        spec = TinyModelSpec(
            vocab_size=args.vocab, hidden_size=args.hidden, num_layers=args.layers, seed=args.seed
        )
    except ValidationError as exc:
        raise invalid("tiny-model settings", exc) from None
    start = time.monotonic()
    tiny_model.build(spec, args.out)
    print(f"wrote {args.out} (vocab {spec.vocab_size:,}) in {time.monotonic() - start:.1f}s")
    return 0
