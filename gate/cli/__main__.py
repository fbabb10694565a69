import sys

from gate.cli.main import main

sys.exit(main())
