"""A fetched body to (title, Markdown, links): HTML via trafilatura, PDFs via pypdf, text as is."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from html import unescape
from urllib.parse import urldefrag, urljoin

MAX_LINKS = 100
MAX_LINK_TEXT = 200

HTML_TYPES = ("text/html", "application/xhtml+xml")
TEXT_TYPES = (
    "text/",
    "application/json",
    "application/xml",
    "application/javascript",
    "application/x-yaml",
    "application/yaml",
    "application/toml",
)
PDF_TYPES = ("application/pdf", "application/x-pdf")


class Unreadable(Exception):
    """The body is not something web_fetch reads (binary, a broken PDF); message for the model."""


@dataclass
class Page:
    title: str
    markdown: str
    links: list[dict[str, str]] = field(default_factory=list)
    kind: str = "html"  # html | pdf | text


def kind_of(content_type: str, head: bytes) -> str:
    """html, pdf, text or binary, from the Content-Type and the first bytes."""
    ctype = content_type.split(";", 1)[0].strip().lower()
    if ctype in PDF_TYPES or head.startswith(b"%PDF-"):
        return "pdf"
    if ctype in HTML_TYPES:
        return "html"
    if ctype.startswith(TEXT_TYPES) or ctype.endswith(("+json", "+xml")):
        return "text"
    if not ctype or ctype in ("application/octet-stream", "binary/octet-stream"):
        sample = head[:2048]
        if b"\x00" in sample:
            return "binary"
        if re.search(rb"<(!doctype html|html|head|body)\b", sample[:512], re.IGNORECASE):
            return "html"
        try:
            sample.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start < len(sample) - 4:  # not just a character cut at the sample's end
                return "binary"
        return "text"
    return "binary"


def decode(body: bytes, encoding: str | None) -> str:
    for candidate in (encoding, "utf-8"):
        if candidate:
            try:
                return body.decode(candidate)
            except (LookupError, UnicodeDecodeError):
                continue
    return body.decode("utf-8", errors="replace")


def links_of(html: str, base_url: str) -> list[dict[str, str]]:
    """The page's http(s) links, absolute, without fragments or duplicates, at most MAX_LINKS."""
    import lxml.html

    try:
        root = lxml.html.fromstring(html)
    except Exception:  # lxml refuses empty or odd documents
        return []
    base = root.xpath("string(//base/@href)") or base_url
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    for anchor in root.iter("a"):
        href = (anchor.get("href") or "").strip()
        if not href:
            continue
        url = urldefrag(urljoin(str(base), href))[0]
        if not url.lower().startswith(("http://", "https://")) or url in seen:
            continue
        seen.add(url)
        text = " ".join(anchor.text_content().split())[:MAX_LINK_TEXT]
        out.append({"url": url, "text": text})
        if len(out) >= MAX_LINKS:
            break
    return out


def from_html(html: str, url: str) -> Page:
    import trafilatura

    markdown = (
        trafilatura.extract(
            html,
            url=url,
            output_format="markdown",
            include_links=True,
            include_tables=True,
            include_comments=False,
            favor_recall=True,
        )
        or ""
    )
    # the document's own <title> first; trafilatura's guess (og:title, h1...) otherwise
    found = re.search(r"<title[^>]*>(.*?)</title>", html, re.IGNORECASE | re.DOTALL)
    title = unescape(" ".join(found.group(1).split())) if found else ""
    if not title:
        meta = trafilatura.extract_metadata(html)
        title = meta.title if meta is not None and meta.title else ""
    return Page(title=title, markdown=markdown.strip(), links=links_of(html, url), kind="html")


def from_pdf(body: bytes) -> Page:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(body))
        pages = [page.extract_text() or "" for page in reader.pages]
        meta = reader.metadata
        title = str(meta.title) if meta is not None and meta.title else ""
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise Unreadable(f"the PDF could not be read ({type(exc).__name__}: {exc})") from exc
    parts = [f"## Page {n}\n\n{text.strip()}" for n, text in enumerate(pages, 1) if text.strip()]
    return Page(title=title, markdown="\n\n".join(parts), kind="pdf")


def from_text(text: str) -> Page:
    return Page(title="", markdown=text.strip(), kind="text")


def needs_scripts(html: str, page: Page) -> bool:
    """A page whose text is (nearly) all built by scripts: little extracted text, scripts there."""
    if len(page.markdown) >= 200:
        return False
    return bool(re.search(r"<script\b", html, re.IGNORECASE))
