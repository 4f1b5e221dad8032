#!/usr/bin/python3
"""`strata report` in a real browser: headless Chromium loads the page, its DOM after load has
every section, one timeline row per simulated rank and no element made from a file name, and a
screenshot shows the charts in their colours (the PNG decoded here, in pure Python).

Exits 77 (CTest's SKIP_RETURN_CODE) when Chromium is not installed: `./setup.sh --tests`
installs Debian's `chromium`.
"""

import argparse
import html.parser
import json
import os
import shutil
import struct
import subprocess
import sys
import zlib

SKIP = 77

# The page's colours (tools/src/report_parts.cpp): the timeline's forward and backward kernels and
# the memory bars' activations, as a screenshot must show them.
FORWARD_BLUE = (0x4E, 0x79, 0xA7)
BACKWARD_GREEN = (0x59, 0xA1, 0x4F)
ACTIVATIONS_RED = (0xE1, 0x57, 0x59)
WIDTH, HEIGHT = 1280, 2000


class Elements(html.parser.HTMLParser):
    """Counts a document's elements by tag and by class, and collects section ids and text."""

    def __init__(self):
        super().__init__()
        self.tags = {}
        self.classes = {}
        self.section_ids = []
        self.text = []

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        attributes = dict(attrs)
        for name in (attributes.get("class") or "").split():
            self.classes[name] = self.classes.get(name, 0) + 1
        if tag == "section":
            self.section_ids.append(attributes.get("id"))

    def handle_data(self, data):
        self.text.append(data)


def elements_of(text):
    parser = Elements()
    parser.feed(text)
    return parser


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode_png(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA PNG, as Chromium writes."""
    with open(path, "rb") as file:
        data = file.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    position, idat = 8, b""
    width = height = None
    while position < len(data):
        (length,) = struct.unpack(">I", data[position:position + 4])
        kind = data[position + 4:position + 8]
        body = data[position + 8:position + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or colour not in (2, 6) or interlace != 0:
                raise ValueError(f"{path}: PNG depth {depth}, colour type {colour}, "
                                 f"interlace {interlace} is not what this reads")
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        position += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            up_left = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + ((left + up) >> 1)) & 0xFF
            elif kind == 4:
                line[i] = (line[i] + paeth(left, up, up_left)) & 0xFF
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, channels)])
        previous = line
    return width, height, rows


def run(command, **options):
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, **options)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {result.returncode}: {result.stderr}")
    return result.stdout


def main():
    arguments = argparse.ArgumentParser(description=__doc__)
    arguments.add_argument("--strata", required=True)
    arguments.add_argument("--fixtures", required=True, help="tests/fixtures")
    arguments.add_argument("--work-dir", required=True)
    arguments.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    options = arguments.parse_args()
    if not os.access(options.chromium, os.X_OK):
        print(f"SKIP: Chromium is not installed ({options.chromium}); ./setup.sh --tests "
              "installs Debian's chromium")
        return SKIP

    work = os.path.abspath(options.work_dir)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    # The plan set's pp2 plan in full (two pipeline ranks), compared with the set's other two and
    # with a copy whose file name is markup; a training log beside it.
    plan_set = os.path.join(options.fixtures, "plan_set", "valid", "gpt-micro-phases.json")
    plan_file = os.path.join(work, "pp2.json")
    document = json.load(open(plan_set))
    pp2 = next(entry for entry in document["plans"] if entry["id"] == "pp2")
    json.dump(pp2["plan"], open(plan_file, "w"))
    markup_name = os.path.join(work, "x<b>bold.json")
    shutil.copy(plan_file, markup_name)
    log = os.path.join(work, "train.jsonl")
    with open(log, "w") as file:
        for step, measured in enumerate([1.3e-3, 1.2e-3, 1.25e-3], start=1):
            file.write(json.dumps({"step": step, "step_time_s": measured,
                                   "predicted_step_time_s": 1.24e-3}) + "\n")
    page = os.path.join(work, "report.html")
    run([options.strata, "report", "--plan", plan_set, "--id", "pp2", "--compare", markup_name,
         "--train-log", log, "--out", page])
    source = elements_of(open(page, encoding="utf-8").read())

    chromium = [options.chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
                "--hide-scrollbars", f"--user-data-dir={os.path.join(work, 'profile')}"]
    environment = dict(os.environ, HOME=work)
    dom = elements_of(run(chromium + ["--dump-dom", "file://" + page], env=environment))
    failures = []

    def check(condition, message):
        if not condition:
            failures.append(message)

    for section in ["summary", "timeline", "memory", "breakdown", "comparison", "measured"]:
        check(section in dom.section_ids, f"the loaded page has no section {section}")
    check(dom.classes.get("rank-row") == 2,
          f"{dom.classes.get('rank-row')} timeline rows after load, not 2 (pp 2, symmetric)")
    check(dom.classes.get("plan-row") == 4, f"{dom.classes.get('plan-row')} compared plans, not 4")
    check(dom.classes.get("measured-point") == 3, "not 3 measured steps in the chart")
    # What the parser built is what was written: no element lost or made up.
    for tag in ["svg", "rect", "section", "table", "tr"]:
        check(dom.tags.get(tag) == source.tags.get(tag),
              f"{dom.tags.get(tag)} <{tag}> after load, {source.tags.get(tag)} in the file")
    check("b" not in dom.tags, "a file name's markup became a <b> element")
    check(any("x<b>bold.json" in text for text in dom.text),
          "the file name is not shown as written")

    screenshot = os.path.join(work, "report.png")
    run(chromium + [f"--screenshot={screenshot}", f"--window-size={WIDTH},{HEIGHT}",
                    "file://" + page], env=environment)
    width, height, rows = decode_png(screenshot)
    check((width, height) == (WIDTH, HEIGHT), f"the screenshot is {width}×{height}")
    pixels = [pixel for row in rows for pixel in row]
    colours = set(pixels)
    not_white = sum(1 for pixel in pixels if pixel != (255, 255, 255)) / len(pixels)
    check(len(colours) >= 50, f"the screenshot has only {len(colours)} colours")
    check(not_white > 0.05, f"the screenshot is {100 * (1 - not_white):.1f}% white")
    drawn = {}
    for name, colour in [("forward", FORWARD_BLUE), ("backward", BACKWARD_GREEN),
                         ("activations", ACTIVATIONS_RED)]:
        drawn[name] = sum(1 for pixel in pixels if pixel == colour)
        check(drawn[name] >= 200, f"{drawn[name]} pixels of the {name} colour {colour}: not drawn")

    print(f"report_browser: {len(source.section_ids)} sections, {dom.tags.get('rect')} rects "
          f"after load; screenshot {width}×{height}, {len(colours)} colours, "
          f"{100 * not_white:.1f}% not white; pixels in the parts' colours {drawn}")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
