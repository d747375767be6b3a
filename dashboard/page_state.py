"""What a browser can read of the dashboard page's state: JavaScript predicates for Playwright's `wait_for_function`,
shared by the browser tests (tests/dashboard/test_browser.py) and `scripts/bench_cli.py --browser`.

Streamlit's frontend shows the script's run state on its root element, `data-test-script-state`: "initial" before the
first run, "running", then "notRunning". Waiting on it waits for the state itself, never for a time (issue 43 item 5:
the status widget waited on before appears only 500 ms into a run, so on a loaded machine a wait could end before
the run it waited for had begun).
"""

# the script is idle after a finished run
IDLE_JS = """() => document.querySelector('[data-testid="stApp"]')
  ?.getAttribute('data-test-script-state') === 'notRunning'"""
# every visible chart has drawn its SVG (or canvas)
CHARTS_DRAWN_JS = """() => [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')]
  .filter(c => c.offsetParent !== null).every(c => c.querySelector('svg, canvas'))"""
# how many script runs this page has seen finish (an attribute change whose old value was "running"), counted from
# the first call on: call it before an action that reruns the script, then wait for `run_ended_js(count)`
RUNS_DONE_JS = """() => {
  if (window.__runsDone === undefined) {
    window.__runsDone = 0;
    new MutationObserver(records => { for (const r of records) if (r.oldValue === 'running') window.__runsDone++; })
      .observe(document.documentElement, {subtree: true, attributes: true, attributeOldValue: true,
                                          attributeFilter: ['data-test-script-state']});
  }
  return window.__runsDone;
}"""


def run_ended_js(done: int) -> str:
    """A run ended after RUNS_DONE_JS returned `done`, and the script is idle."""
    return f"() => window.__runsDone > {int(done)} && ({IDLE_JS})()"


def page_ready_js() -> str:
    """The page a user sees: the script idle after a run and every visible chart drawn."""
    return f"() => ({IDLE_JS})() && ({CHARTS_DRAWN_JS})()"
