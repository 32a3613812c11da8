"""Take the README's screenshots of the web app: a real `gpuplan serve`, Debian's chromium (via
Playwright), one plan loaded from its link, as the first screen shows it on a laptop (1440x900)
and on a phone (390x844). Run: .venv/bin/python docs/screenshot.py [OUT_DIR]"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from playwright.sync_api import sync_playwright

from helpers.web_server import served

# LoRA of Llama 3.1 8B on an RTX 4090: it does not fit, so the answer shows by how much and the fixes
QUERY = "?model=llama-3.1-8b&task=lora&gpu=GeForce+RTX+4090&batch_size=1&tokens=5e7"
SHOTS = (("web.png", 1440, 900), ("web-phone.png", 390, 844))


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
    exe = shutil.which("chromium") or sys.exit("no chromium on PATH (make browser)")
    with served() as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        for name, width, height in SHOTS:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(url + "/" + QUERY)
            page.wait_for_selector("body[data-state=done]", state="attached", timeout=60_000)
            page.wait_for_timeout(500)  # let Plotly finish its transitions
            page.screenshot(path=str(out / name))
            page.close()
            print(out / name)
        browser.close()


if __name__ == "__main__":
    main()
