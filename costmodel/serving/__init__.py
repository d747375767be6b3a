"""The serving replay: a `vllm bench serve` run read (`run`), vLLM's scheduler replayed step by step (`replay`), the
step time fitted on the run's own timeline (`step_fit`), the A/B of the draft step's strategies and its
detectability (`ab`), the rows every face renders (`table`) and the replay's error against real runs
(`validation`). Above `answers` (it prices the draft step through a Question), below `cli`."""
