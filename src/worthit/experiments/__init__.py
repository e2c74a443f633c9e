"""The experiments, one folder each: ``worthit.experiments.<name>`` holds an experiment's measurement, its
Parquet tables, its analysis for the report, its config section and its registration (docs/architecture.md,
"Adding an experiment"); its rule file is ``workflow/rules/<name>.smk``."""
