"""The type stubs (rshmem/__init__.pyi, rshmem/_rshmem.pyi) name everything the package and its
extension module export."""

import ast
import os

import rshmem
from rshmem import _rshmem


def stub_names(path):
    tree = ast.parse(open(path).read())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
    return names


def test_package_stub_covers_all():
    here = os.path.dirname(rshmem.__file__)
    missing = set(rshmem.__all__) - stub_names(os.path.join(here, "__init__.pyi"))
    assert not missing, f"__init__.pyi lacks {sorted(missing)}"
    assert os.path.exists(os.path.join(here, "py.typed"))


def test_extension_stub_covers_the_module():
    here = os.path.dirname(rshmem.__file__)
    public = {n for n in dir(_rshmem) if not n.startswith("_")}
    missing = public - stub_names(os.path.join(here, "_rshmem.pyi"))
    assert not missing, f"_rshmem.pyi lacks {sorted(missing)}"
