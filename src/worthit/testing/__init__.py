"""Test and benchmark tooling, shipped with the package so tests and benchmarks can start it as a module, but
never imported by the workflow or the stages: the calibrated synthetic OpenAI-compatible server
(:mod:`worthit.testing.calibration`) that measures the load generator itself (benchmarks/loadgen_fidelity/)."""
