"""Sphinx configuration of rkm's documentation: ``pip install ".[docs]" && sphinx-build -W docs docs/_build/html``.

The pages are MyST markdown (myst-parser), the API reference is generated from the numpydoc docstrings
(autosummary + numpydoc), and the gallery's scripts (docs/examples) run during the build (sphinx-gallery), so
every figure in it comes from the installed rkm. Nothing is downloaded at build time (no intersphinx).
"""

import importlib.util

import rkm

project = "rkm"
author = "the rkm developers"
copyright = "the rkm developers"
release = rkm.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "examples", "auto_examples/*.ipynb", "auto_examples/*.py", "auto_examples/*.zip"]
templates_path = ["_templates"]

# The API reference: one page per public name, its members listed by the class template.
autosummary_generate = True
autodoc_default_options = {"members": True}
autodoc_typehints = "none"  # numpydoc's Parameters section carries the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# rkm.torch needs PyTorch, an optional extra: without it the reference is built against stand-ins of torch's
# names, so that the pages (written from the docstrings, which import nothing) exist in every build.
autodoc_mock_imports = [] if importlib.util.find_spec("torch") else ["torch"]

myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath"]

sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": "/plot_",
    "abort_on_example_error": True,
    "download_all_examples": False,
    "remove_config_comments": True,
    "min_reported_time": 1,
}
html_theme = "pydata_sphinx_theme"
html_title = f"rkm {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_show_sourcelink = False


def _skip_metadata_requests(app, what, name, obj, skip, options):
    """scikit-learn generates set_{method}_request on every estimator (metadata routing); they are its API,
    documented there, and their docstrings cite labels of scikit-learn's own documentation."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return skip


def setup(app):
    app.connect("autodoc-skip-member", _skip_metadata_requests)
