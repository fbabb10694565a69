"""One build's server and load: `vllm serve` in its own process group, the streaming load
client, the cells measured on one build, the per-stream integrity checks, the metrics
(vllm bench serve's definitions) and results.json."""

from gate.measure.measured_build import Launch, MeasuredBuild, open_measured_build
from gate.measure.results import (
    CellKey,
    CellSummary,
    Results,
    ServerInfo,
    load_results,
    save_results,
)

__all__ = ["CellKey", "CellSummary", "Results", "ServerInfo", "load_results", "save_results", "Launch", "MeasuredBuild", "open_measured_build"]
