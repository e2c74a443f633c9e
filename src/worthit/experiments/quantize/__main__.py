"""``python -m worthit.experiments.quantize``: see :mod:`worthit.experiments.quantize.cli`."""

import sys

from worthit.experiments.quantize.cli import main

sys.exit(main())
