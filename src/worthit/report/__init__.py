"""The study report: comparison and verdict tables, recommended deployments, MBU, plots, one HTML page.

``data`` reads every result through the schema module; ``analysis`` turns it into figures that carry
n and a 95% interval; ``decide`` applies the configurable rules; ``tables``, ``plots`` and ``html``
render. Nothing here measures: a study without an experiment simply has no rows for it.
"""
