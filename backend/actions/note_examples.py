"""The examples of the service's own notes, recognised in a reply so they never run.

The format note (corrections.format_help) and the thinking prompt show each action's
example: `- terminal_run(command, cwd?): Run a shell command …` followed by
`<terminal_run><command>python3 src/app.py</command>…`, or `example: <read_file>…`. A weak
model that repeats the note back would otherwise have those examples read as six actions
it never decided on. An example counts as the note's when it stands where the note puts it:
right after its action's `- signature:` line, or after `example:`. The same text written on
its own is the model's action.
"""

from __future__ import annotations

import re
from functools import lru_cache

from backend.actions.corrections import signature
from backend.actions.model import ActionSpec
from backend.actions.vocabulary import Vocabulary


@lru_cache(maxsize=256)
def _pattern(spec: ActionSpec) -> re.Pattern[str]:
    head = rf"^[ \t]*-[ \t]*{re.escape(signature(spec))}:[^\n]*\n[ \t]*"
    return re.compile(rf"(?:{head}|example:[ \t]*)({re.escape(spec.example)})", re.M)


def without_note_examples(text: str, vocab: Vocabulary) -> tuple[str, int]:
    """The reply with the note's examples (of ``vocab``'s actions) blanked out, and how many
    there were."""
    found = 0
    for spec in list(vocab.known.values()):
        if not spec.example or spec.example not in text:
            continue
        text, n = _pattern(spec).subn(lambda m: m.group(0)[: m.start(1) - m.start(0)], text)
        found += n
    return text, found
