"""Icons that need no special font (real Chromium with Debian's fonts, the real server, the
fake model over HTTP): the pause sign of a run that waits for a person is drawn as an SVG
wherever it shows. The ⏸ glyph it was is in no font Debian's Chromium has by default (DejaVu
only): it showed as an empty box in the status badges and on the plan's waiting task."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, expect

from tests.e2e.server import Server
from tests.fakellm import FakeModelServer
from tests.support.ui import script_marker_task, start_waiting

NewPage = Callable[..., Page]

PAUSE_GLYPH = "\u23f8"

# every piece of text the page draws: text nodes of shown elements, and the contents of
# ::before / ::after
DRAWN_TEXT = """() => {
  const parts = [document.body.innerText]
  for (const el of document.querySelectorAll('body *')) {
    for (const pseudo of ['::before', '::after']) {
      const content = getComputedStyle(el, pseudo).content
      if (content && content !== 'none' && content !== 'normal') parts.push(content)
    }
  }
  return parts.join('\\n')
}"""


def test_the_waiting_icons_are_drawn_not_glyphs_missing_from_the_fonts(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    script_marker_task(fake_model)
    page = new_page()
    start_waiting(page, ui_server)
    expect(page.get_by_test_id("approval-card")).to_have_attribute("data-state", "pending")
    badge = page.get_by_test_id("conversation-status")
    expect(badge).to_have_attribute("data-status", "waiting")
    for width in (1280, 390):  # the same page on a desktop and a phone
        page.set_viewport_size({"width": width, "height": 860})
        icons = {
            "the conversation's status badge": badge.locator("svg"),
            "the plan's waiting task": page.locator(
                "[data-testid=task][data-status=waiting] .task-icon svg"
            ),
            "the waiting line": page.get_by_test_id("waiting").locator("svg"),
        }
        if width > 600:  # the sidebar is folded away on a phone
            icons["the sidebar's badge"] = page.locator(".conv-item.active .badge svg")
        for where, icon in icons.items():
            expect(icon, where).to_have_count(1)
            expect(icon, where).to_be_visible()
            box = icon.bounding_box()
            assert box is not None and box["width"] >= 5 and box["height"] >= 5, (where, box)
            fill = icon.locator("rect").first.evaluate("r => getComputedStyle(r).fill")
            assert fill not in ("none", "rgba(0, 0, 0, 0)"), (where, fill)
        drawn = page.evaluate(DRAWN_TEXT)
        assert PAUSE_GLYPH not in drawn, drawn[:2000]
        # the words stay the status itself
        expect(badge).to_have_text("waiting")
