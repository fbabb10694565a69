"""Where a build spends its time: py-spy sampling of every serving process while a steady
load runs, the profile per 1k output tokens, the diff of two builds' profiles and its
differential flame graph."""

from gate.core.exports import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "data": ["BuildProfile", "load_build_profile"],
    "diff_file": ["DiffSettings", "ProfileDiff"],
    "sampling": ["SamplingOptions"],
    "traffic": ["profile_server"],
})
