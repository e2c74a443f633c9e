"""``python -m worthit.quantize``: see :mod:`worthit.quantize.cli`."""

import sys

from worthit.quantize.cli import main

sys.exit(main())
