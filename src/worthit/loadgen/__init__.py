"""The load generator: streaming client (client), workloads (workload) and the calibration server
(calibration) that measures the client itself. See benchmarks/loadgen_fidelity for how exact it is."""
