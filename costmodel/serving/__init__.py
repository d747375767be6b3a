"""The serving replay: a `vllm bench serve` run read (`run`), its engine steps recovered from the chunks' arrival
times (`steps`), the server it ran against inferred (`server`), its prompts' prefill chunks (`prefill`), its front
end (`front_end`) and the step model, token budget and step jitter (`step_fit`) measured on those steps, the
requests as the replay takes them (`inputs`), vLLM's scheduler replayed step by step (`replay`), the A/B of the
strategies' whole draft step with its detectability (`ab`), the rows every face renders (`table`), a bench file as
a batch distribution for `recommend` (`workload`) and the replay's error against real runs and real A/B pairs
(`validation`). Above `answers` (it prices the whole draft step through a Question), below `cli`."""
