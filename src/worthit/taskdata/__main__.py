"""``python -m worthit.taskdata DIR``: write the offline tasks for a hand-run ``lm_eval --include_path DIR``."""

from worthit.taskdata import main

if __name__ == "__main__":
    raise SystemExit(main())
