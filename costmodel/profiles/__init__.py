"""Inputs the model reads: cluster profiles (their JSON schema, parsing, loading) and model presets.

A profile is data, never code: `types` holds its frozen dataclasses, `schema` the JSON schema it is checked
against, `parse` the checks that turn a document into a `Profile`, `store` the bundled files and `load_profile`
(`paths`: the data folder and the default profile, without numpy), `kernel_params` the GPU kernel model's parameter
sets, `consistency` the on-load check that bootstrap replicates bracket their point values and `replicates` the
replicate documents as Profiles. `presets` reads `data/presets/models.csv`. Imports only `costmodel.io`.
"""
