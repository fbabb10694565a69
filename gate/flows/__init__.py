"""The orchestrators that tie the stages together: measure one build (run), two builds
round by round until decided (ab), one build against itself to learn the runner's noise
(calibrate), and write a profile diff with its evidence; bisect a slowdown to the first
slower commit and to the smallest set of its hunks (bisect, bisect_hunks)."""

