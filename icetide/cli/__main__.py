"""``python -m icetide.cli``: the same as the ``icetide`` command."""

import sys

from icetide.cli.main import main

sys.exit(main())
