"""The GPU jobs' first check: is this runner fresh and isolated (gate.github.runner_check).

Run it before anything is installed, from the gate checked out at its pinned commit, with the
system's interpreter and no site-packages:

    /usr/bin/python3 -I -S .gate/scripts/check_runner.py --marker M --model-cache DIR

-I keeps PYTHONPATH, the user site and the working directory (the code under test) off
sys.path; -S keeps site-packages off it, so the check imports only the standard library and
the gate next to this file. Exit codes as `gate trust check-runner`: 0 fresh, 1 refused,
2 bad arguments.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gate.github.runner_check import main  # noqa: E402  (after the gate's folder is on sys.path)

sys.exit(main())
