"""The load generator: the streaming client (client: records, transports and sse, scheduling), what it sends
(prompts, workloads), the load levels (levels) and the server's /metrics timeline (timeline). The calibration
server that measures the client itself is tooling, :mod:`worthit.testing.calibration`; see
benchmarks/loadgen_fidelity for how exact the client is."""
