"""What users ask, built on the model and its evidence: sweeps, comparisons, recommendations, explanations.

`question` builds and validates one user question (every face's: CLI flags, dashboard widgets and URL state);
`answer` prices it once into the `Answer` every face renders (`point`: the point answer's dict).

`sweep` prices grids to Arrow / CSV / Parquet; `compare` one scenario on several profiles; `workload` reads a
batch mix; `recommend`, `engine_config` and `recommend_text` turn a workload into a decision with the config to
paste, `impact` a saving into ITL / TPOT / throughput; `placement` says where the draft should run (placement table, the
(placement, strategy, collective) triple); `sensitivity` ranks parameters by elasticity; `explain`
restates each component as its formula; `report` assembles the offline HTML page; `provenance` words where the
numbers come from (the sources line, a CSV cell, the GPU-mismatch badge); `table_quirks` flags the non-monotone
nodes of a measured kernel table a scenario is priced from. No pricing of their own: each
calls `costmodel.model` / `costmodel.evidence`.
"""
