"""Reports from cards: Markdown now (terminals, pull requests); more formats build on it."""

from .markdown import render as markdown

__all__ = ["markdown"]
