"""What in the PR may explain a slowdown: its diff hunks in the watched structured-output
paths, and their ranking by the time the profile diff measured in the functions they
change; the bisect's search over commits and delta debugging over hunks, and the files a
bisect keeps."""

from gate.evidence.attribution import Evidence
from gate.evidence.hunks import Hunk, HunkSet, extract_hunks, load_hunks

__all__ = ["Hunk", "HunkSet", "extract_hunks", "load_hunks", "Evidence"]
