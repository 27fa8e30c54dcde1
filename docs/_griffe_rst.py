"""A griffe extension for the API reference: the docstrings' reStructuredText roles as Markdown.

Docstrings cite other objects as ``:class:`Ensemble``` or ``:func:`sweep.run```; Markdown shows
them as inline code instead (``Ensemble``). Loaded by mkdocstrings (see ``mkdocs.yml``).
"""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj):`~?\.?([^`]+)`")


class RstRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(r"`\1`", obj.docstring.value)
