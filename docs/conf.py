"""Sphinx configuration for the fdbqueue documentation."""

from __future__ import annotations

project = "fdbqueue"
author = "The fdbqueue developers"
copyright = "2026, The fdbqueue developers"

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
nitpicky = False
html_theme = "furo"
html_title = "fdbqueue"
exclude_patterns = ["_build"]
