"""`python -m openaccel ...` is the `openaccel` command."""

import sys

from .cli import main

sys.exit(main())
