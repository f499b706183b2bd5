"""The pictures as a browser shows them: `packoracle draw`'s SVG and `packoracle verify --html`'s page opened
in headless Chromium (Debian's, through chromium-driver), a screenshot of each kept in $SCREENSHOTS, and the
page's DOM asked whether what must be seen is there and visible: a non-zero box inside the drawing or page.

Run by scripts/browser_checks.sh, which installs what this needs; $PACKORACLE_BIN is the packoracle to run."""

import os
import pathlib
import subprocess

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

import long_row

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("PACKORACLE_BIN", str(ROOT / "build" / "cli" / "packoracle"))
SHOTS = pathlib.Path(os.environ.get("SCREENSHOTS", ROOT / "build" / "screenshots"))
MEGATRON = ROOT / "examples" / "dumps" / "megatron_training_copy_buggy.jsonl"
CLEAN = ROOT / "examples" / "dumps" / "hf_flatten_clean.jsonl"

# Every element given as a selector: its box, whether it is visible, and whether it lies inside its owning
# <svg> (nothing cut at the drawing's edge) and inside the page.
BOXES_JS = """
const [selector] = arguments;
const page = [document.documentElement.scrollWidth, document.documentElement.scrollHeight];
return [...document.querySelectorAll(selector)].map(el => {
  const r = el.getBoundingClientRect();
  const x = r.left + window.scrollX, y = r.top + window.scrollY;
  const style = getComputedStyle(el);
  const owner = el.ownerSVGElement;
  let inSvg = true;
  if (owner) {
    const o = owner.getBoundingClientRect();
    inSvg = r.left >= o.left - 0.5 && r.right <= o.right + 0.5 && r.top >= o.top - 0.5 && r.bottom <= o.bottom + 0.5;
  }
  return {w: r.width, h: r.height, x: x, y: y,
          shown: style.visibility !== 'hidden' && style.display !== 'none' && style.opacity !== '0',
          inSvg: inSvg,
          inPage: x >= -0.5 && y >= -0.5 && x + r.width <= page[0] + 0.5 && y + r.height <= page[1] + 0.5,
          text: (el.textContent || '').slice(0, 200)};
});
"""


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000", "--hide-scrollbars"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    SHOTS.mkdir(parents=True, exist_ok=True)
    return tmp_path_factory.mktemp("pictures")


def run(*args, expect=(0,)):
    done = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True)
    assert done.returncode in expect, f"{args}: exit {done.returncode}\n{done.stderr}"
    return done


def open_and_shoot(browser, path, name):
    """Opens `path`, sizes the window to the whole page and keeps its screenshot as SHOTS/name.png."""
    browser.set_window_size(1400, 1000)
    browser.get(path.as_uri())
    width = browser.execute_script("return document.documentElement.scrollWidth")
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(min(max(width, 800), 4000), min(max(height, 600), 8000))
    browser.save_screenshot(str(SHOTS / f"{name}.png"))


def boxes(browser, selector):
    return browser.execute_script(BOXES_JS, selector)


def assert_visible(browser, selector, at_least=1):
    found = boxes(browser, selector)
    assert len(found) >= at_least, f"{selector}: {len(found)} elements, expected at least {at_least}"
    for b in found:
        assert b["w"] > 0 and b["h"] > 0 and b["shown"], f"{selector}: not visible: {b}"
        assert b["inSvg"] and b["inPage"], f"{selector}: outside its drawing or the page: {b}"
    return found


def assert_no_text_cut(browser):
    """Every text of every drawing lies inside its drawing: the title first (the issue's cut-off title)."""
    assert_visible(browser, "svg text.title")
    assert_visible(browser, "svg text")


def draw(out, dump, row, name):
    svg = out / f"{name}.svg"
    run("draw", dump, "--row", row, "--svg", svg)
    return svg


def test_megatron_row_shows_positions_and_boundaries(browser, out):
    open_and_shoot(browser, draw(out, MEGATRON, 1, "megatron_row1"), "megatron_row1")
    assert_no_text_cut(browser)
    assert_visible(browser, '[data-lane="position"] .lane-background')
    assert_visible(browser, '[data-lane="position-policy"] .lane-background')
    # The training copy's bug: slot 1's position is 3, the policy wants 1.
    marks = assert_visible(browser, "rect.position.disagree")
    assert len(marks) >= 1
    for lane in ("boundaries:spans", "boundaries:doc_ids", "boundaries:EOD tokens"):
        assert_visible(browser, f'[data-lane="{lane}"] .lane-background')
    assert_visible(browser, "rect.boundary")
    assert_visible(browser, '[data-lane="loss-mask"] rect.loss-mask')
    assert_visible(browser, '[data-lane="target"] rect.target')
    assert_visible(browser, "rect.cell", at_least=64)


def test_megatron_row0_marks_its_wrong_positions(browser, out):
    open_and_shoot(browser, draw(out, MEGATRON, 0, "megatron_row0"), "megatron_row0")
    assert_no_text_cut(browser)
    slots = {b["text"] for b in boxes(browser, "text.position-value")}
    assert "7" in slots  # positions as dumped: 0..7, never reset
    assert len(assert_visible(browser, "rect.position.disagree")) == 4  # slots 4-7 should restart at 0
    assert_visible(browser, "rect.position-policy.disagree", at_least=4)


def test_a_4096_slot_row_is_windowed_around_its_first_disagreement(browser, out):
    dump = long_row.write(out / "long_row.jsonl")
    svg = draw(out, dump, 0, "long_row_4096")
    open_and_shoot(browser, svg, "long_row_4096")
    assert_no_text_cut(browser)
    note = assert_visible(browser, "text.window-note")
    assert "of 4,096" in note[0]["text"] and "1,030" in note[0]["text"], note
    assert_visible(browser, "rect.overview-window")
    assert_visible(browser, "rect.overview-disagree")
    assert_visible(browser, "rect.position.disagree")
    assert len(boxes(browser, "rect.cell")) == 64 * 64
    # Legible: a slot is at least 16 px wide, and the drawing stays within a few screens.
    cell = boxes(browser, '[data-lane="slot"] rect.slot')[0]
    assert cell["w"] >= 15, cell
    width = browser.execute_script("return document.querySelector('svg').getBoundingClientRect().width")
    assert width <= 3000, width


def test_verify_html_links_steps_and_violations(browser, out):
    page = out / "megatron.html"
    plain = run("verify", MEGATRON, expect=(1,)).stdout
    with_html = run("verify", MEGATRON, "--html", page, expect=(1,)).stdout
    assert with_html == plain  # the page changes nothing on stdout, nor the exit code
    open_and_shoot(browser, page, "verify_megatron_html")
    violations = assert_visible(browser, "section.violation")
    assert_visible(browser, "section.violation pre.drawn-row")
    assert_visible(browser, "section.violation .picture svg")
    assert_visible(browser, ".picture rect.position.disagree")
    assert_visible(browser, "table.steps tr.step", at_least=1)
    # Every link goes somewhere: steps to violations, violations to steps.
    targets = browser.execute_script("""
      return [...document.querySelectorAll('a.to-violation, a.to-step, a.to-picture')].map(a => [a.className,
        a.getAttribute('href'), !!document.getElementById(a.getAttribute('href').slice(1))]);""")
    kinds = {t[0] for t in targets}
    assert {"to-violation", "to-step"} <= kinds, targets
    assert all(t[2] for t in targets), [t for t in targets if not t[2]]
    assert len([t for t in targets if t[0] == "to-violation"]) >= len(violations)
    link = browser.find_element("css selector", "a.to-violation")
    link.click()
    assert browser.execute_script("return location.hash") == "#" + link.get_attribute("href").split("#")[1]
    assert browser.execute_script("return document.querySelector(':target').className") == "violation"


def test_verify_html_draws_a_long_row_as_its_window(browser, out):
    page = out / "long_row.html"
    run("verify", "--partial", long_row.write(out / "long_row_verify.jsonl"), "--html", page, expect=(1,))
    open_and_shoot(browser, page, "verify_long_row_html")
    assert_visible(browser, "section.violation .picture svg")
    note = assert_visible(browser, ".picture text.window-note")
    assert "of 4,096" in note[0]["text"], note
    assert_visible(browser, ".picture rect.overview-window")
    assert_visible(browser, ".picture rect.position.disagree")


def test_verify_html_of_a_clean_dump_has_no_violations(browser, out):
    page = out / "clean.html"
    run("verify", CLEAN, "--html", page)
    open_and_shoot(browser, page, "verify_clean_html")
    assert boxes(browser, "section.violation") == []
    assert boxes(browser, ".picture") == []
    assert_visible(browser, "p.clean")
    assert_visible(browser, "table.steps tr.step")


def test_verify_html_to_an_unwritable_path_names_it(out):
    bad = out / "no-such-dir" / "page.html"
    done = run("verify", CLEAN, "--html", bad, expect=(2,))
    assert str(bad) in done.stderr
