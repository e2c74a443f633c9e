# report: every result -> the verdicts, recommended deployments and the other tables (decide_study), figures
# (plot_study), and the deployments' validation set against their promise with one self-contained HTML page
# (render_report). Inputs are the measured results only, so Snakemake rebuilds the report when a result
# changes; `worthit report --results DIR` re-decides a results folder outside Snakemake.
from worthit import schemas  # noqa: E402
from worthit.experiments.deploy.tables import REPORT_VALIDATION  # noqa: E402

# every report table but the validation, which needs the deployments served (deploy.smk) first
DECISION_TABLES = [t.name.removeprefix("report_") for t in schemas.report_tables() if t is not REPORT_VALIDATION]


# every result of every variant (kv, load levels and their timelines, prefix lengths, accuracy and its
# samples, any registered experiment's: Study.result_files)
REPORT_RESULTS = [f"{RESULTS}/variant~{v}/{f}.parquet" for v in STUDY.variants for f in STUDY.result_files(v)]


rule decide_study:
    input:
        results=REPORT_RESULTS,
    output:
        parquet=expand(f"{REPORT_DIR}/{{table}}.parquet", table=DECISION_TABLES),
        csv=expand(f"{REPORT_DIR}/{{table}}.csv", table=[t for t in DECISION_TABLES if t != "verdicts"]),
        verdicts=report(f"{REPORT_DIR}/verdicts.csv", category="Report", caption="../report/verdicts.rst"),
        md=report(f"{REPORT_DIR}/tables.md", category="Report", caption="../report/tables.rst"),
        config=f"{REPORT_DIR}/config.yaml",
    log:
        f"{RESULTS}/logs/report/decide.log",
    benchmark:
        f"{BENCHMARKS}/decide_study/study.tsv"
    script:
        "../scripts/decide_study.py"


rule plot_study:
    input:
        results=REPORT_RESULTS,
    output:
        figures=report(
            directory(f"{REPORT_DIR}/figures"),
            patterns=["{name}.svg"],
            category="Figures",
            caption="../report/figures.rst",
        ),
    log:
        f"{RESULTS}/logs/report/plot.log",
    benchmark:
        f"{BENCHMARKS}/plot_study/study.tsv"
    script:
        "../scripts/plot_study.py"


rule render_report:
    input:
        results=REPORT_RESULTS,
        tables=rules.decide_study.output.parquet,
        figures=rules.plot_study.output.figures,
        validation=get_validation_files,
        cost=f"{RESULTS}/cost.parquet",  # cost.smk: everything but this rendering
        plan=f"{RESULTS}/plan_vs_measured.parquet",  # plan.smk: the plan against the measurement
    output:
        html=report(f"{RESULTS}/report.html", category="Report", caption="../report/report.rst"),
        validation=f"{REPORT_DIR}/validation.parquet",
        validation_csv=f"{REPORT_DIR}/validation.csv",
    log:
        f"{RESULTS}/logs/report/render.log",
    benchmark:
        f"{BENCHMARKS}/render_report/study.tsv"
    script:
        "../scripts/render_report.py"
