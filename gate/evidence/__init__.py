"""What in the PR may explain a slowdown: its diff hunks in the watched structured-output
paths, their ranking by the time the profile diff measured in the functions they change, and
the model runner(s) and backend(s) its changed files call for (scope.py); the bisect's search
over commits and delta debugging over hunks, and the files a bisect keeps."""

from gate.core.exports import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "attribution": ["Evidence"],
    "hunks": ["Hunk", "HunkSet", "extract_hunks", "load_hunks"],
})
