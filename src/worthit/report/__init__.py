"""The study report, split by job.

- ``data``: every result read through the schema module (per variant, per deployment, study-wide);
- ``context``: the typed study, its results and rules, and each optimisation named and oriented;
- ``experiments``: the registry; each experiment (load, capacity, accuracy, prefix, specdec) analyses its
  results (pure functions), feeds evidence to the decision layer, and declares its tables and figures;
- ``decide``: evidence -> one of six outcomes per regime (adopt, reject, inconclusive, not applicable,
  failed, not run), with the reason and what would settle it; ``outcomes`` (its vocabulary and verdict
  types), ``evidence`` (the comparisons and their interval arithmetic) and ``wording`` (its texts) beside it;
- ``tables``, ``deployments``: the views that span experiments; ``views``: how a table is declared;
- ``plots``, ``render`` (Jinja2 template in ``templates/``): figures, Markdown and one HTML page;
- ``build``: the stages in order, and ``worthit report``.

Nothing here measures: a study without an experiment simply has no rows for it.
"""
