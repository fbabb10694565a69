"""gate: a CI regression gate for vLLM structured-output (guided JSON) performance."""

__version__ = "0.1.0"
