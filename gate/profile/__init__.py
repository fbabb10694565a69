"""Where a build spends its time: py-spy sampling of every serving process while a steady
load runs, the profile per 1k output tokens, the diff of two builds' profiles and its
differential flame graph."""
