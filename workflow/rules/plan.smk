# plan: before anything is fetched or served, each variant's prerequisites on this hardware and its figures
# predicted from the roofline (plan.parquet, plan.md); after the study, the plan set against the measurement
# (plan_vs_measured.parquet), its measured figures read from the report's tables. No inputs: the plan is cheap and is the first job of every run; the comparison
# plans again a variant whose model shapes were unknown before its model was fetched.
from worthit.config import config_hash  # noqa: E402


rule plan_study:
    output:
        plan=report(f"{RESULTS}/plan.parquet", category="Plan"),
        md=report(f"{RESULTS}/plan.md", category="Plan", caption="../report/plan.rst"),
    log:
        f"{RESULTS}/logs/plan.log",
    benchmark:
        f"{BENCHMARKS}/plan_study/study.tsv"
    localrule: True
    params:
        config_hash=config_hash(config),
    script:
        "../scripts/plan_study.py"


rule compare_plan:
    input:
        plan=f"{RESULTS}/plan.parquet",
        # the measured figures are the report's (decide_study): one knee, one TPOT, one tok/s per level
        capacity=f"{REPORT_DIR}/capacity.parquet",
        levels=f"{REPORT_DIR}/levels.parquet",
        manifests=sorted({model_manifest(STUDY.variant(v).model) for v in STUDY.variants}),
    output:
        parquet=report(f"{RESULTS}/plan_vs_measured.parquet", category="Plan"),
        md=report(f"{RESULTS}/plan_vs_measured.md", category="Plan", caption="../report/plan_vs_measured.rst"),
    log:
        f"{RESULTS}/logs/plan_vs_measured.log",
    benchmark:
        f"{BENCHMARKS}/compare_plan/study.tsv"
    localrule: True
    script:
        "../scripts/compare_plan.py"
