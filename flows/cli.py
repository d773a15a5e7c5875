"""``python -m flows.cli``, kept for deployments and scripts written before the command moved into the package:
the ``privsynth`` command is ``privsynth.cli`` (``python -m privsynth``)."""

import sys

from privsynth.cli import main

if __name__ == "__main__":
    sys.exit(main())
