"""The default branch watched over time: a history store (one SQLite file) fed by every
default-branch run, one entry per commit x plan x runner class x check; change points found
in each check's series; the acknowledgements of intended slowdowns kept beside them."""
