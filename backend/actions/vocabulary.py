"""The action names a parser reads: one registry's actions, their aliases, and the patterns
made from them (what opens an action, what may follow a parameter's body).

A :class:`Vocabulary` is made once per registry (:attr:`Registry.vocabulary
<backend.actions.registry.core.Registry.vocabulary>`) and never changes: a parser given
another registry's vocabulary reads other actions, and nothing is shared between them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cached_property

from backend.actions.model import PARAM_ALIASES, ActionSpec
from backend.actions.scan_names import WRAPPERS


class Vocabulary:
    """``known``: every action the parser reads; ``offered``: the ones every task is offered
    (the format lessons list them); ``aliases``: other names models use (alias -> action)."""

    def __init__(self, known: Iterable[ActionSpec], offered: Iterable[ActionSpec] = ()) -> None:
        self.known: dict[str, ActionSpec] = {spec.name: spec for spec in known}
        self.offered: dict[str, ActionSpec] = {spec.name: spec for spec in offered}
        self.aliases: dict[str, str] = {}
        for spec in self.known.values():
            for alias in spec.aliases:
                if alias in self.known or self.aliases.get(alias, spec.name) != spec.name:
                    other = self.aliases.get(alias, alias)
                    raise ValueError(
                        f"{spec.name}'s alias {alias!r} is already {other}'s name or alias"
                    )
                self.aliases[alias] = spec.name
        # names accepted as XML tags: the actions' and every alias (`<bash>` too: an opener in
        # prose with no closer is a mention, never an action)
        self.tags: dict[str, str] = {name: name for name in self.known}
        self.tags.update({alias.lower(): name for alias, name in self.aliases.items()})
        self._params: dict[ActionSpec | None, tuple[str, ...]] = {}
        self._params_lower: dict[ActionSpec | None, frozenset[str]] = {}
        self._follow: dict[ActionSpec | None, re.Pattern[str]] = {}

    def canonical(self, name: str) -> str | None:
        """The action ``name`` means (ours or an alias), or None."""
        key = name.strip()
        if key in self.known:
            return key
        low = key.lower()
        if low in self.known:
            return low
        return self.aliases.get(low)

    @cached_property
    def _names(self) -> str:
        every = sorted({*self.known, *self.aliases}, key=len, reverse=True)
        return "|".join(re.escape(n) for n in every)

    @cached_property
    def follow_any(self) -> str:
        """What may follow the real end of any parameter body (after whitespace)."""
        return (
            r"\s*(?:\Z|```|~~~|</?(?:[\w.-]+:|\uff5cDSML\uff5c)?(?:"
            + self._names
            + "|"
            + "|".join(WRAPPERS)
            + r")(?=[\s=/>])"
            r"|</?(?:[\w.-]+:|\uff5cDSML\uff5c)?(?:parameter|param|argument|arg)(?=[\s=/>])"
            r"|<arg_key>)"
        )

    @cached_property
    def new_action(self) -> re.Pattern[str]:
        """An opener of a new action (inside another whose close tag is missing)."""
        return re.compile(
            r"<(?:(?:"
            + self._names
            + r")(?=[\s/>])|function(?=[\s=])|(?:[\w.-]+:|\uff5cDSML\uff5c)?invoke\s)",
            re.I,
        )

    def param_names(self, spec: ActionSpec | None) -> tuple[str, ...]:
        """Tag names that open a param of this action (ours and aliases; None: any action's)."""
        got = self._params.get(spec)
        if got is None:
            if spec is None:
                own = {p for s in self.known.values() for p in (*s.required, *s.optional)}
            else:
                own = {*spec.required, *spec.optional}
            names = own | {alias for alias, target in PARAM_ALIASES.items() if target in own}
            got = self._params[spec] = tuple(sorted(names, key=len, reverse=True))
        return got

    def param_names_lower(self, spec: ActionSpec | None) -> frozenset[str]:
        got = self._params_lower.get(spec)
        if got is None:
            got = self._params_lower[spec] = frozenset(p.lower() for p in self.param_names(spec))
        return got

    def body_follow(self, spec: ActionSpec | None) -> re.Pattern[str]:
        """What can follow the real end of a parameter body of this action."""
        got = self._follow.get(spec)
        if got is None:
            params = "|".join(re.escape(p) for p in self.param_names(spec))
            got = re.compile(self.follow_any[:-1] + r"|<(?:" + params + r")(?=[\s/>]))", re.I)
            self._follow[spec] = got
        return got
