"""`argmax-tp` / `python -m costmodel`: the parser and entry (`main`), one module per command (`cmd_<command>`).

`main` builds the parser from `options` (flags only: no numpy, pandas or model import) and imports the command's
module (`cmd_predict`, `cmd_profiles`, ...; its imports at its top) only when that command runs, so `--help`,
`profiles` and `presets` start fast. `scenario_args` turns the scenario flags into a Scenario, `placement_args` the
placement flags into a draft architecture and a memory budget, `render` a prediction
into text / JSON, `output` a table into a CSV file or stdout.

The top layer: it imports every other one and nothing imports it.
"""
