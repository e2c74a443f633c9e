# report: every result -> the study's tables and verdicts (decide_study), figures (plot_study) and one
# self-contained HTML page (render_report). Inputs are the measured results and the aggregate tables,
# so Snakemake rebuilds the report only when a result changes.
REPORT_DIR = f"{RESULTS}/report"
REPORT_TABLES = ["verdicts", "deployments", "comparison", "experiments", "capability", "capacity", "levels"]


def get_report_results(wildcards):
    """Every measurement of every variant (kv, load levels, prefix lengths, accuracy, ...)."""
    return [f"{RESULTS}/variant~{v}/{m}.parquet" for v in STUDY.variants for m in STUDY.consumers(v)]


def get_report_aggregates(wildcards):
    """The study-level tables the other stages aggregate for this study (summary, prefix_summary, ...)."""
    return [o for o in get_final_outputs() if o.endswith(".parquet") and not o.startswith(REPORT_DIR)]


rule decide_study:
    input:
        results=get_report_results,
        aggregates=get_report_aggregates,
    output:
        parquet=expand(f"{REPORT_DIR}/{{table}}.parquet", table=REPORT_TABLES),
        csv=expand(f"{REPORT_DIR}/{{table}}.csv", table=REPORT_TABLES[1:]),
        verdicts=report(f"{REPORT_DIR}/verdicts.csv", category="Report", caption="../report/verdicts.rst"),
        md=report(f"{REPORT_DIR}/tables.md", category="Report", caption="../report/tables.rst"),
    log:
        f"{RESULTS}/logs/report/decide.log",
    script:
        "../scripts/decide_study.py"


rule plot_study:
    input:
        results=get_report_results,
        aggregates=get_report_aggregates,
    output:
        figures=report(
            directory(f"{REPORT_DIR}/figures"),
            patterns=["{name}.svg"],
            category="Figures",
            caption="../report/figures.rst",
        ),
    log:
        f"{RESULTS}/logs/report/plot.log",
    script:
        "../scripts/plot_study.py"


rule render_report:
    input:
        results=get_report_results,
        aggregates=get_report_aggregates,
        tables=rules.decide_study.output.parquet,
        figures=rules.plot_study.output.figures,
        validation=get_validation_files,
    output:
        html=report(f"{RESULTS}/report.html", category="Report", caption="../report/report.rst"),
    log:
        f"{RESULTS}/logs/report/render.log",
    script:
        "../scripts/render_report.py"
