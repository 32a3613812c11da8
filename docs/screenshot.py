"""Take the README's screenshot of the web app: a real `gpuplan serve`, Debian's chromium (via
Playwright), one plan loaded from its link. Run: .venv/bin/python docs/screenshot.py [OUT.png]"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from playwright.sync_api import sync_playwright

from helpers.web_server import served

QUERY = "?model=llama-3.1-8b&task=lora&batch_size=2&tokens=5e7&gpu=A100+SXM4+80GB"


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).with_name("web.png"))
    exe = shutil.which("chromium") or sys.exit("no chromium on PATH (make browser)")
    with served() as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1500})
        page.goto(url + "/" + QUERY)
        page.wait_for_selector("body[data-state=done]", state="attached", timeout=60_000)
        page.wait_for_timeout(500)  # let Plotly finish its transitions
        page.screenshot(path=str(out))
        browser.close()
    print(out)


if __name__ == "__main__":
    main()
