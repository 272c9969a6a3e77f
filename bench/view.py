"""`spu view` on a 10,000-step run: time to the first screen in headless Chromium, against a 100-step run.

Writes a synthetic run directory (each step a model turn with text and tokens, and one tool call from
every category in turn with a 0.3-6 KB output, a draft every 500 steps), builds the self-contained HTML
with `spu view --out`'s code, opens it from disk in the system Chromium (Playwright, no network) and reads
the page's own mark: the time from navigation start until the run page (header, cards, activity strip,
first rows of the timeline) is in the document and painted. The same is measured for a 100-step run as
the baseline. Target: under 2 s for 10,000 steps.

    .venv/bin/python bench/view.py [--steps 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from environment.view.categories import TOOL_CATEGORY
from environment.view.collect import collect
from environment.view.page import render_page

CHROMIUM = ("/usr/lib/chromium/chromium", "chromium", "chromium-browser", "google-chrome")
LOOPBACK_ONLY_ARGS = [
    "--no-sandbox",
    "--proxy-server=http://127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
GROUP = [f"e{i:03d}" for i in range(8)]


def write_run(root: Path, steps: int) -> Path:
    run = root / f"run-{steps}"
    (run / "drafts").mkdir(parents=True)
    tools = sorted(TOOL_CATEGORY)
    t = 0.0
    lines = [
        {
            "type": "run_start",
            "time": "2026-01-01T00:00:00Z",
            "elapsed_s": 0.0,
            "run_id": "bench",
            "task_id": "bench-task",
            "model": "bench:model",
            "tools": [],
        },
        {
            "type": "message",
            "time": "2026-01-01T00:00:00Z",
            "elapsed_s": 0.0,
            "kind": "task",
            "message": {"role": "user", "content": "Rank the experiments. " * 200},
        },
    ]
    n_drafts = 0
    for step in range(1, steps + 1):
        tool = tools[step % len(tools)]
        t += 2.5
        lines.append(
            {
                "type": "model_turn",
                "time": "2026-01-01T00:00:00Z",
                "elapsed_s": round(t, 3),
                "step": step,
                "model": "bench:model",
                "message": {
                    "role": "assistant",
                    "content": f"Step {step}: I will now call {tool} to check "
                    "the substituent effect on the ranking. " * 3,
                    "tool_calls": [{"id": f"c{step}", "name": tool, "arguments": {"x": step}}],
                },
                "usage": {"input_tokens": 1200 + step, "output_tokens": 150, "cache_read_tokens": 30000},
                "cost_usd": 0.0125,
                "latency_s": 2.1,
                "attempts": 1,
            }
        )
        t += 0.4 + (step % 7)
        output = json.dumps(
            {
                "result": [
                    {"index": i, "value": i * 0.137, "smiles": "OC(=O)c1ccccc1"} for i in range(4 + step % 80)
                ],
                "provenance": {"tool": tool, "tool_version": "1", "engine": "bench"},
            }
        )
        lines.append(
            {
                "type": "tool_result",
                "time": "2026-01-01T00:00:00Z",
                "elapsed_s": round(t, 3),
                "step": step,
                "tool_call_id": f"c{step}",
                "name": tool,
                "arguments": {"x": step},
                "content": output,
                "is_error": step % 97 == 0,
                "wall_s": 0.4 + (step % 7),
            }
        )
        if step % 500 == 0:
            n_drafts += 1
            order = GROUP[step // 500 % 8 :] + GROUP[: step // 500 % 8]
            (run / "drafts" / f"draft-{n_drafts:03d}.json").write_text(
                json.dumps(
                    {
                        "task_id": "bench-task",
                        "task_version": "1",
                        "rankings": [{"group_id": "g1", "order": order}],
                    }
                )
            )
    end = {
        "exit_status": "limit_reached",
        "reason": f"step limit {steps} reached",
        "submission": "fallback",
        "drafts": n_drafts,
        "steps": steps,
        "elapsed_s": t,
        "cost_usd": 0.0125 * steps,
        "usage": {"input_tokens": 1200 * steps, "output_tokens": 150 * steps},
    }
    lines.append({"type": "run_end", "time": "2026-01-01T00:00:00Z", "elapsed_s": t, **end})
    (run / "trajectory.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (run / "run.json").write_text(json.dumps(end))
    return run


def first_screen_ms(browser, html: Path) -> float:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(html.as_uri())
    page.wait_for_function("window.spuRendered !== undefined")
    # one more frame: the mark is set when the DOM is built; this waits for it to be painted
    painted = page.evaluate(
        "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now()))))"
    )
    rows = page.locator("[data-testid=rows] details").count()
    page.close()
    assert rows > 0, "the timeline shows no rows"
    return float(painted)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    executable = next((c for c in CHROMIUM if shutil.which(c) or Path(c).exists()), None)
    if executable is None:
        sys.exit("bench/view.py: no Chromium found; run `bash scripts/setup-browser.sh` as root")
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        for steps in (100, args.steps):
            run = write_run(Path(tmp), steps)
            started = time.perf_counter()
            html = Path(tmp) / f"view-{steps}.html"
            html.write_text(render_page(collect(run, grade=False)), encoding="utf-8")
            build_s = time.perf_counter() - started
            results[steps] = {"build_s": build_s, "bytes": html.stat().st_size, "html": html}
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=shutil.which(executable) or executable, headless=True, args=LOOPBACK_ONLY_ARGS
            )
            for result in results.values():
                first_screen_ms(browser, result["html"])  # warm-up: first launch of the renderer
                result["ms"] = statistics.median(
                    first_screen_ms(browser, result["html"]) for _ in range(args.repeat)
                )
            browser.close()
    base, big = results[100], results[args.steps]
    for steps, r in results.items():
        print(
            f"{steps:>6} steps: HTML {r['bytes'] / 1e6:6.2f} MB, built in {r['build_s']:5.2f} s, "
            f"first screen in Chromium {r['ms']:7.1f} ms (median of {args.repeat})"
        )
    print(
        f"{args.steps}-step run: first screen {big['ms'] / base['ms']:.2f}x the 100-step run; "
        f"{big['ms'] / 2000:.2f} of the 2 s budget"
    )


if __name__ == "__main__":
    main()
