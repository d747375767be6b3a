"""How sure we are: reference measurements, validation errors, discrepancy pools, ensembles and intervals.

`reference` loads the bundled published and measured tables; `validate` scores the model on them; `discrepancy`
estimates each op's model error (fit reports, kernel CV, the conformal pool over held-out rows: `pool` its numpy
parts, `residuals` the pools built from frames); `ensemble` combines bootstrap replicates with discrepancy draws;
`intervals`, `point_intervals`, `interval_table` and `decode_intervals` turn an ensemble into 90% intervals;
`coverage` checks that those intervals cover what they claim; `engine_figures` prices the in-engine figures
(the engine recipes, host and serving terms) for `validate --engine-figures`; `gpu_kernel_fit` fits the GPU
kernel model on measured tables. Built on `costmodel.model`.
"""
