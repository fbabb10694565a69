"""Where a build spends its time: py-spy sampling of every serving process while a steady
load runs, the profile per 1k output tokens, the diff of two builds' profiles and its
differential flame graph."""

from gate.profile.data import BuildProfile, load_build_profile
from gate.profile.diff import DiffSettings, ProfileDiff
from gate.profile.sampling import SamplingOptions
from gate.profile.traffic import profile_server

__all__ = ["BuildProfile", "load_build_profile", "DiffSettings", "ProfileDiff", "SamplingOptions", "profile_server"]
