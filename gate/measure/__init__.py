"""One build's server and load: `vllm serve` in its own process group, the streaming load
client, the cells measured on one build, the per-stream integrity checks, the metrics
(vllm bench serve's definitions) and results.json."""
