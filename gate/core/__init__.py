"""The foundation every stage stands on: user-facing errors and exit codes, files (atomic
writes, strict YAML/JSON loading), settings read once from the environment, progress lines,
git, and plain-text helpers. Imports nothing else of the gate."""
