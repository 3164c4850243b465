"""`python -m hpcjax` is the `hpcjax` command (inside containers without the console script)."""

import sys

from hpcjax.cli import main

sys.exit(main())
