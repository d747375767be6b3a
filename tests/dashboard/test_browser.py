"""Real-browser end-to-end test: `streamlit run app.py` driven by Playwright on Debian's Chromium.

Needs /usr/bin/chromium (`apt-get install -y chromium`; not `playwright install`). Without it the test is
skipped - unless the environment variable CI is set, where a missing browser is a failure.
Screenshots go to artifacts/ (ignored by git); UPDATE_DOCS_SCREENSHOT=1 also refreshes docs/dashboard.png.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from costmodel import load_profile, predict
from costmodel.answers import per_call
from dashboard.page_state import CHARTS_DRAWN_JS, IDLE_JS, RUNS_DONE_JS, run_ended_js
from dashboard.state import TABS, Inputs

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
FOCUS = "local_argmax_pairs"
WIDTH = 1400


def require_browser() -> None:
    reason = None
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} not found: install Debian's Chromium (apt-get install -y chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            reason = "the playwright Python package is not installed"
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"browser test cannot run in CI: {reason}")
        pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    require_browser()
    ARTIFACTS.mkdir(exist_ok=True)
    port = free_port()
    log = open(ARTIFACTS / "streamlit-browser-test.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                             "--server.port", str(port), "--browser.gatherUsageStats", "false"],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"streamlit exited with {proc.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("streamlit did not answer /_stcore/health within 90 s")
            time.sleep(0.25)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def browser(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


def settle(page) -> None:
    """Wait until the script is idle after a finished run and every visible chart is drawn (at least one)."""
    settle_run(page)
    page.locator('[data-testid="stVegaLiteChart"]').first.wait_for(timeout=60_000)
    page.wait_for_function(CHARTS_DRAWN_JS, timeout=60_000)


def rerun_by(page, action: Callable[[], object]) -> None:
    """Do `action()` - a click or an upload that reruns the script - and wait until that run has finished (a run
    ended after the action and the script is idle): the state the caller asserts on, whatever the machine's load."""
    done = page.evaluate(RUNS_DONE_JS)
    action()
    page.wait_for_function(run_ended_js(done), timeout=60_000)


def switch_on(page, key_class: str, tries: int = 3) -> None:
    """Turn on the st.toggle inside `key_class` and wait until its script run finished: a click that lands while
    the expander is still opening, or during a rerun, can be lost (seen once on a loaded CI machine), so the
    toggle's checked state is read back and the click repeated, at most `tries` times."""
    label = page.locator(f"{key_class} label").first
    box = page.locator(f"{key_class} input").first
    label.wait_for(timeout=60_000)
    for _ in range(tries):
        if box.is_checked():
            break
        rerun_by(page, label.click)
    assert box.is_checked(), f"{key_class}: the toggle did not turn on"


def full_page_screenshot(page, path: Path) -> None:
    """Streamlit scrolls inside its main block, so grow the viewport to the content before the shot."""
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMainBlockContainer\"]').scrollHeight")
    page.set_viewport_size({"width": WIDTH, "height": int(height) + 120})
    page.wait_for_timeout(500)
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size({"width": WIDTH, "height": 1000})


def fastest(pred) -> str:
    """Prediction.best() of a single scenario as a name (a 0-d array or a str)."""
    return str(np.asarray(pred.best()).reshape(-1)[0])


PER_CALL = "engine=none"  # these checks price the per-call answer; the default (vLLM's) is test_parity's and below


def expected_best(batch: int) -> str:
    inputs = Inputs(engine="none")
    return fastest(predict(inputs.spec.scenario(batch), load_profile(inputs.profile)))


def test_change_batch_download_csv_and_restore_link(server, browser):
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": WIDTH, "height": 1000}, accept_downloads=True)
    console_errors: list[str] = []
    page.on("console", lambda msg: console_errors.append(msg.text) if msg.type == "error" else None)
    page.on("requestfailed", lambda req: console_errors.append(f"request failed: {req.url}"))
    page.goto(f"{server}/?{PER_CALL}")
    page.get_by_text(f"Fastest at batch {Inputs.batch}: {expected_best(Inputs.batch)}").wait_for(timeout=60_000)
    settle(page)
    full_page_screenshot(page, ARTIFACTS / "dashboard.png")
    if os.environ.get("UPDATE_DOCS_SCREENSHOT") == "1":
        full_page_screenshot(page, ROOT / "docs" / "dashboard.png")

    # change the batch: the verdict must flip to the small-batch answer
    box = page.locator(".st-key-batch input")
    box.fill("2")
    start = time.perf_counter()
    box.press("Enter")
    page.get_by_text(f"Fastest at batch 2: {expected_best(2)}").wait_for(timeout=30_000)
    latency_s = time.perf_counter() - start
    page.get_by_text(f"{FOCUS} is slower than full_all_gather").wait_for(timeout=10_000)
    (ARTIFACTS / "browser-latency.txt").write_text(f"batch change -> new verdict shown: {latency_s:.3f} s\n")
    print(f"batch change -> new verdict shown in the browser: {latency_s:.3f} s")
    assert latency_s < 5.0
    page.wait_for_function("() => new URLSearchParams(location.search).get('batch') === '2'", timeout=10_000)
    settle(page)

    # the CSV behind the batch sweep chart
    with page.expect_download() as info:
        page.locator(".st-key-download_time_vs_batch button").click()
    download = info.value
    assert download.suggested_filename == "time_vs_batch.csv"
    table = pd.read_csv(download.path())
    assert {"batch", "strategy", "total_us", "saving_per_draft_call_us"} <= set(table.columns)
    assert table["batch"].min() == Inputs.batch_min and table["batch"].max() == Inputs.batch_max
    row = table[(table["batch"] == 256) & (table["strategy"] == FOCUS)].iloc[0]
    inputs = Inputs(engine="none")
    pred = predict(inputs.spec.scenario(256.0), load_profile(inputs.profile))
    assert row["total_us"] == pytest.approx(pred.total_us(FOCUS).item())
    page.screenshot(path=str(ARTIFACTS / "dashboard-batch-2.png"))

    # a copied link restores the view in a fresh session
    link = page.url
    other = browser.new_page(viewport={"width": WIDTH, "height": 1000})
    other.goto(link)
    other.get_by_text(f"Fastest at batch 2: {expected_best(2)}").wait_for(timeout=60_000)
    expect(other.locator(".st-key-batch input")).to_have_value("2", timeout=30_000)
    other.close()
    page.close()
    assert console_errors == []  # nothing fetched from outside, no script errors


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk; fails unless `data` is a PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", "not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_recommendation_panel_and_png_export(server, browser):
    """The Recommendation tab shows the decision and the config to paste; the Export menu's PNG of the sweep
    chart decodes as a PNG of the size vl-convert gives that chart (2x its SVG)."""
    import re

    from costmodel.answers.question import draft_arch
    from costmodel.answers.recommend import recommend
    from costmodel.serving.workload import load_workload
    from dashboard import charts, data, export

    page = browser.new_page(viewport={"width": WIDTH, "height": 1000}, accept_downloads=True)
    console_errors: list[str] = []
    page.on("console", lambda msg: console_errors.append(msg.text) if msg.type == "error" else None)
    page.on("requestfailed", lambda req: console_errors.append(f"request failed: {req.url}"))
    page.goto(f"{server}/?tab=Recommendation&k=5")  # the default question: vLLM's whole draft step
    name = sorted(data.example_workloads())[0]  # the dashboard's first example (not data/examples/SOURCES.md)
    cli = subprocess.run([sys.executable, "-m", "costmodel", "recommend", "--workload",
                          str(ROOT / "data/examples" / name), "--num-spec-tokens", "5"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    sentence = next(x for x in cli.splitlines() if x.startswith("RECOMMENDATION: ")).removeprefix("RECOMMENDATION: ")
    page.get_by_text(sentence.split(":")[0]).first.wait_for(timeout=60_000)
    settle(page)
    # the CLI's decision sentence, verbatim, in the tab's decision box (issue 35: one question, one answer)
    assert sentence in shown_text(page, "stAlert")
    inputs = Inputs(k=5, tab="Recommendation")
    rec = recommend({"vocab": inputs.vocab, "draft_vocab": inputs.draft_vocab, "tp": inputs.tp,
                     "num_spec_tokens": 5, "engine": "vllm"}, load_workload(ROOT / "data/examples" / name),
                    load_profile(inputs.profile), arch=draft_arch(inputs.preset, inputs.draft_vocab)[0])
    assert rec.headline == sentence
    vllm = next(c.text for c in rec.configs if c.engine == "vllm")
    page.locator('[data-testid="stCode"]').filter(has_text="use_local_argmax_reduction").first.wait_for(timeout=30_000)
    shown = page.locator('[data-testid="stCode"]').first.inner_text()
    assert "".join(shown.split()) == "".join(vllm.split())
    full_page_screenshot(page, ARTIFACTS / "dashboard-recommendation.png")

    # the PNG export of the batch sweep chart (Batch sweep tab)
    page.goto(f"{server}/?{PER_CALL}")
    page.get_by_text(f"Fastest at batch {Inputs.batch}: {expected_best(Inputs.batch)}").wait_for(timeout=60_000)
    settle(page)
    page.get_by_role("button", name="Export").click()
    with page.expect_download(timeout=60_000) as info:
        page.locator(".st-key-png_sweep_chart button").click()
    download = info.value
    assert download.suggested_filename == "sweep_chart.png"
    png = Path(download.path()).read_bytes()
    ev_inputs = Inputs(engine="none")
    from dashboard.verdict import evaluate

    ev = evaluate(ev_inputs, {})
    table = per_call.sweep_table(data.sweep_frame(ev.profile_text, ev_inputs.spec, ev_inputs.batch_min,
                                                ev_inputs.batch_max))
    u = ev.verdict.interval
    band = None if u is None or u.crossover_batch is None else (u.crossover_batch.low, u.crossover_batch.high)
    spec = charts.with_batch_marker(charts.sweep_chart(table, ev.verdict.crossover_batch, band),
                                    ev_inputs.batch)
    svg = export.chart_svg(spec)
    width, height = (float(re.search(rf'{k}="([0-9.]+)"', svg).group(1)) for k in ("width", "height"))
    assert png_size(png) == (round(export.PNG_SCALE * width), round(export.PNG_SCALE * height))
    (ARTIFACTS / "sweep_chart.png").write_bytes(png)
    page.close()
    assert console_errors == []


def test_closed_preset_box_tells_the_llama4_maverick_presets_apart(server, browser):
    """The closed "Model preset" box shows, uncut, a label that tells EAGLE from EAGLE-3 for Llama 4 Maverick (the
    full name on the line under it), and every preset's label fits the box (measured with the box's own font;
    the old full-length label does not, so the measurement can fail)."""
    from playwright.sync_api import expect

    from costmodel.profiles.presets import presets
    from dashboard.tables import preset_labels

    labels = preset_labels(presets())
    page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
    box = page.locator('.st-key-preset input[role="combobox"]')
    shown = {}
    for name in ("llama4-maverick", "llama4-maverick-eagle3"):
        page.goto(f"{server}/?preset={name}")
        expect(box).to_have_value(labels[name], timeout=60_000)
        scroll, client = box.evaluate("e => [e.scrollWidth, e.clientWidth]")
        assert scroll <= client, f"{labels[name]!r} is cut off ({scroll} > {client} px)"
        row = presets().loc[name]
        page.locator('[data-testid="stSidebar"]').get_by_text(f"{row['model']} - {row['draft']}").wait_for(
            timeout=10_000)
        shown[name] = box.input_value()
    assert shown["llama4-maverick"].startswith("EAGLE · Llama 4 Maverick")
    assert shown["llama4-maverick-eagle3"].startswith("EAGLE-3 · Llama 4 Maverick")
    old = "EAGLE-3 · Llama 4 Maverick 17B-128E"
    fits = box.evaluate("""(e, texts) => {
        const s = getComputedStyle(e), ctx = document.createElement('canvas').getContext('2d');
        ctx.font = s.font;
        const room = e.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
        return texts.map(t => ctx.measureText(t).width <= room);
    }""", [old, *labels.values()])
    assert fits[0] is False  # the full-length label is cut at this width
    assert [t for t, ok in zip(labels.values(), fits[1:]) if not ok] == []
    page.close()


# -- untrusted text: no link, no image, no request off the page ------------------------------------------------
EVIL = "![i](https://evil.example/i.png) [click](https://evil.example) mail@evil.example www.evil.example"
HOSTILE_QUERY = ("tab=[click](https://evil.example)&preset=mail@evil.example&profile=![i](https://evil.example/i.png)"
                 "&x<img src=https://evil.example/x.png>=1&www.evil.example=a@b.co")


def watch_requests(page) -> list[str]:
    """Every URL the page requests (documents, scripts, images, fetches, websockets)."""
    urls: list[str] = []
    page.on("request", lambda req: urls.append(req.url))
    page.on("websocket", lambda ws: urls.append(ws.url))
    return urls


def assert_local_only(urls: list[str]) -> None:
    from urllib.parse import urlsplit

    outside = [u for u in urls if urlsplit(u).scheme not in ("data", "blob")
               and urlsplit(u).hostname not in ("127.0.0.1", "localhost")]
    assert outside == [], outside


def assert_no_hostile_link_or_image(page) -> None:
    """No <a> or <img> anywhere that points at evil.example or is a mailto: link, and no <a> / <img> at all in
    a Markdown block (alert, caption, markdown, label, tooltip) that shows the hostile text."""
    found = page.evaluate("""() => {
        const bad = [];
        for (const a of document.querySelectorAll('a')) {
            const href = a.getAttribute('href') || '';
            if (/evil|^mailto:|^xmpp:/i.test(href) || /evil/i.test(a.textContent)) bad.push('a ' + href);
        }
        for (const img of document.querySelectorAll('img, source, image, video, audio, iframe, object, embed')) {
            const src = img.getAttribute('src') || img.getAttribute('href') || img.getAttribute('srcset') || '';
            if (/evil/i.test(src) || /evil/i.test(img.getAttribute('alt') || '')) bad.push(img.tagName + ' ' + src);
        }
        for (const md of document.querySelectorAll('[data-testid="stMarkdownContainer"]')) {
            if (/evil/i.test(md.textContent) && md.querySelector('a, img')) bad.push('markup in: ' + md.textContent);
        }
        return bad;
    }""")
    assert found == [], found


def settle_run(page) -> None:
    """Wait until the script is idle after a finished run (a page just loaded; after an action that reruns the
    script, `rerun_by`)."""
    page.wait_for_function(IDLE_JS, timeout=60_000)


def shown_text(page, testid: str) -> str:
    """The visible text of every element with data-testid=`testid`, word joiners taken out."""
    texts = page.locator(f'[data-testid="{testid}"]').all_inner_texts()
    return "\n".join(texts).replace("\u2060", "")


def test_hostile_query_params_form_no_link_image_or_request(server, browser):
    page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
    urls = watch_requests(page)
    page.goto(f"{server}/?{HOSTILE_QUERY}")
    page.get_by_text("ignored unknown query parameter").first.wait_for(timeout=60_000)
    settle(page)
    alerts = shown_text(page, "stAlert")
    assert "tab='[click](https://evil.example)'" in alerts  # shown as typed, as text
    assert "preset='mail@evil.example'" in alerts and "profile='![i](https://evil.example/i.png)'" in alerts
    assert "'www.evil.example'" in alerts and "<img src" in alerts
    assert_no_hostile_link_or_image(page)
    page.wait_for_timeout(1000)  # an image or prefetch the page asked for would have been requested by now
    page.close()
    assert_local_only(urls)


def hostile_profile_json() -> bytes:
    import json

    doc = json.loads((ROOT / "data/profiles/h100-sxm-nvlink.json").read_text())
    doc.update(name=EVIL, title=EVIL)
    doc["provenance"].update(source=EVIL, gpu=EVIL, interconnect=EVIL, citations=[EVIL])
    return json.dumps(doc).encode()


def test_hostile_uploaded_profile_forms_no_link_image_or_request(server, browser):
    """A profile whose name, title and provenance are Markdown links, images, URLs and an e-mail address: the
    sidebar, the provenance badge, the Calibration and Heatmaps tabs show
    it as text, and nothing is fetched from outside."""
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
    urls = watch_requests(page)
    page.goto(f"{server}/?tab=Calibration")
    page.get_by_text("Provenance", exact=True).first.wait_for(timeout=60_000)
    settle_run(page)
    rerun_by(page, lambda: page.locator('.st-key-upload input[type="file"]').set_input_files(
        files=[{"name": "evil.json", "mimeType": "application/json", "buffer": hostile_profile_json()}]))
    page.get_by_text("Provenance", exact=True).wait_for(timeout=60_000)
    expect(page.locator('.st-key-profile input[role="combobox"]')).to_have_value(f"upload: {EVIL}", timeout=60_000)
    settle_run(page)
    page.screenshot(path=str(ARTIFACTS / "dashboard-hostile-profile.png"), full_page=True)
    markdown = shown_text(page, "stMarkdown")
    assert EVIL in markdown and f"GPU: {EVIL}" in markdown  # the badge, provenance source and fields
    assert_no_hostile_link_or_image(page)
    page.locator('.st-key-profile input[role="combobox"]').click()  # the open picker lists the upload as text
    page.get_by_role("option", name=f"upload: {EVIL}").wait_for(timeout=10_000)
    assert_no_hostile_link_or_image(page)
    page.keyboard.press("Escape")
    page.get_by_role("tab", name="Heatmaps").click()
    page.get_by_text("both heatmaps share one colour scale").first.wait_for(timeout=60_000)
    settle(page)
    assert_no_hostile_link_or_image(page)
    page.wait_for_timeout(1000)
    page.close()
    assert_local_only(urls)


# -- narrow and wide windows (issue 18: at 800 px the tiles read "+1…", charts shrank to ~70 px) ----------------------
LAYOUT_PROBE = """() => {
  const main = document.querySelector('[data-testid="stMain"]').getBoundingClientRect();
  const cut = [...document.querySelectorAll('[data-testid="stMetricValue"], [data-testid="stMetricLabel"]')]
    .filter(e => e.scrollWidth > e.clientWidth + 1 || e.innerText.includes('\\u2026')).map(e => e.innerText);
  const charts = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')]
    .map(e => Math.round(e.getBoundingClientRect().width));
  const tabs = [...document.querySelectorAll('[data-testid="stMain"] [role="tab"]')].map(e => {
    const r = e.getBoundingClientRect(); return [e.innerText, r.left >= main.left - 1 && r.right <= main.right + 1];
  });
  return {cut, charts, tabs};
}"""


COMPARE_PROBE = """() => {
  const main = document.querySelector('[data-testid="stMain"]').getBoundingClientRect();
  const frames = [...document.querySelector('.st-key-compare_show').closest('[data-testid="stExpander"]')
    .querySelectorAll('[data-testid="stDataFrame"]')];
  return frames.map(frame => {
    const r = frame.getBoundingClientRect();
    const scroller = frame.querySelector('.dvn-scroller');
    return {inside: r.left >= main.left - 1 && r.right <= main.right + 1,
            scroll: scroller ? scroller.scrollWidth - scroller.clientWidth : -1};
  });
}"""


def probe_after_resize(page, width: int, probe: str):
    """Set the window to `width` px, let the charts redraw and the layout settle, and evaluate `probe`."""
    page.set_viewport_size({"width": width, "height": 1000})
    page.wait_for_timeout(1000)
    return page.evaluate(probe)


def check_layout(probe: dict, width: int) -> None:
    """Every verdict tile shows its whole value and label, every tab is on screen (none behind a scroll), and
    the sweep charts are >= 300 px wide (their plot area at this width: test_app's
    test_sweep_charts_keep_a_wide_plot_in_a_narrow_container; Streamlit draws them on a canvas)."""
    assert probe["cut"] == [], f"cut at {width} px: {probe['cut']}"
    assert len(probe["tabs"]) == len(TABS) and all(visible for _, visible in probe["tabs"]), (width, probe["tabs"])
    assert len(probe["charts"]) >= 2 and min(probe["charts"]) >= 300, (width, probe["charts"])


def check_compare(probe: list, width: int) -> None:
    """Issue 18: the side-by-side compare table (seven columns headed `saving_per_draft_call_us[<profile>]`) was
    cut on the right at 800 and 1440 px; now one table per profile (strategy, time, saving, crossover batch under
    short headers) that fits the page without a horizontal scroll."""
    assert len(probe) == 2, (width, probe)  # one table per profile compared
    for table in probe:
        assert table["inside"], (width, probe)
        assert 0 <= table["scroll"] <= 4, (width, probe)  # no horizontal scroll beyond the grid's border (was 277)


def test_tiles_tabs_charts_and_the_compare_table_fit_800_and_1440_px(server, browser):
    """One page, loaded at 800 px (the narrow window that cut the tiles), then widened to 1440 px: the layout at
    both widths, then the compare table at both (one app run per state instead of one per width)."""
    page = browser.new_page(viewport={"width": 800, "height": 1000})
    page.goto(server)
    page.get_by_text(f"Fastest at batch {Inputs.batch}: {expected_best(Inputs.batch)}").wait_for(timeout=60_000)
    settle(page)
    page.wait_for_timeout(1000)
    layout = {800: page.evaluate(LAYOUT_PROBE)}
    page.screenshot(path=str(ARTIFACTS / "dashboard-800px.png"), full_page=True)
    layout[1440] = probe_after_resize(page, 1440, LAYOUT_PROBE)
    page.screenshot(path=str(ARTIFACTS / "dashboard-1440px.png"), full_page=True)
    page.get_by_text("Compare profiles").first.click()
    switch_on(page, ".st-key-compare_show")
    page.get_by_text("time and saving").first.wait_for(timeout=60_000)
    compare = {1440: probe_after_resize(page, 1440, COMPARE_PROBE)}
    page.screenshot(path=str(ARTIFACTS / "dashboard-compare-1440px.png"), full_page=True)
    compare[800] = probe_after_resize(page, 800, COMPARE_PROBE)
    page.screenshot(path=str(ARTIFACTS / "dashboard-compare-800px.png"), full_page=True)
    page.close()
    for width in (800, 1440):
        check_layout(layout[width], width)
        check_compare(compare[width], width)


def test_serving_tab_replays_the_example_run_as_the_cli_does(server, browser):
    """The Serving A/B tab in a real browser: the bundled real vLLM run replayed for the URL's question, with the
    CLI's lines on what it read from the run (server, step fit) in its captions and the A/B table drawn."""
    from costmodel.serving.table import setup_lines
    from dashboard.tables import micro

    example = ROOT / "data" / "examples" / "vllm-cpu-spec-k3.json"
    cli = subprocess.run([sys.executable, "-m", "costmodel", "simulate", "--bench", str(example), "--preset",
                          "llama4-maverick", "--tp", "8", "--json"], cwd=ROOT, check=True, capture_output=True,
                         text=True).stdout
    import json

    lines = setup_lines(json.loads(cli))
    page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
    console_errors: list[str] = []
    page.on("console", lambda msg: console_errors.append(msg.text) if msg.type == "error" else None)
    page.goto(f"{server}/?tab=Serving%20A%2FB&preset=llama4-maverick&tp=8")
    page.get_by_text("inferred max_num_seqs 8", exact=False).first.wait_for(timeout=90_000)
    settle(page)
    captions = " ".join(page.locator("body").inner_text().replace("\u2060", "").split())
    for line in lines[1:4]:  # server and budget, arrivals, step fit
        assert " ".join(micro(line).split()) in captions, line
    assert page.locator('[data-testid="stDataFrame"]').count() >= 1
    full_page_screenshot(page, ARTIFACTS / "dashboard-serving.png")
    page.close()
    assert console_errors == []
