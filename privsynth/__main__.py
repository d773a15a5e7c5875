"""``python -m privsynth``: the ``privsynth`` command (``privsynth.cli``)."""

import sys

from privsynth.cli import main

sys.exit(main())
