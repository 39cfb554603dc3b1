"""The examples in the public docstrings run as written (on the installed package)."""

import doctest
import importlib
import importlib.util
import pkgutil

import pytest

import rkm

# rkm.torch needs the optional PyTorch: without it, its modules are not importable and not checked.
HAS_TORCH = importlib.util.find_spec("torch") is not None

# Every public module: the package itself, its shared modules and the model families; private modules
# (a leading underscore) and the command line are not documentation.
PUBLIC_MODULES = ["rkm"] + [
    info.name
    for info in pkgutil.walk_packages(rkm.__path__, "rkm.")
    if not any(part.startswith("_") for part in info.name.split("."))
    and not info.name.startswith("rkm.cli")
    and (HAS_TORCH or not info.name.startswith("rkm.torch"))
]

FLAGS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in finder.find(module, name, globs={"np": __import__("numpy"), "rkm": rkm}):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples failed in {name}"


def test_the_examples_exist():
    # A regex or import change that finds no example would make the test above pass vacuously.
    finder = doctest.DocTestFinder(exclude_empty=True)
    examples = sum(len(test.examples) for name in PUBLIC_MODULES for test in finder.find(importlib.import_module(name)))
    assert examples >= 10
