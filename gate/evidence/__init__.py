"""What in the PR may explain a slowdown: its diff hunks in the watched structured-output
paths, their ranking by the time the profile diff measured in the functions they change, and
the model runner(s) and backend(s) its changed files call for (scope.py); the bisect's search
over commits and delta debugging over hunks, and the files a bisect keeps."""
