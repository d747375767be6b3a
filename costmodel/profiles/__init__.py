"""Inputs the model reads: cluster profiles (their JSON schema, parsing, loading) and model presets.

A profile is data, never code: `types` holds its frozen dataclasses, `schema` the JSON schema it is checked
against, `parse` the checks that turn a document into a `Profile`, `store` the bundled files and `load_profile`
(`paths`: the data folder and the default profile, without numpy), `kernel_params` the GPU kernel model's parameter
sets, `compact` the compact forms of an ensemble (seed + cited ranges, or columns), `consistency` the on-load check
that the replicates agree with every priced point value and `replicates` the replicate documents as Profiles
(`drawn_replicates`: a seeded ensemble's straight from the parsed point, the same Profiles).
`presets` reads `data/presets/models.csv` (the draft architecture too), `gpus` the GPU memory table
`data/presets/gpus.csv`; `families` groups profiles by GPU family. Imports only `costmodel.io`.
"""
