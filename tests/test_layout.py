"""The house rules of docs/design.md section 1, checked on the source tree: few modules at the top of the
library, no import circle, every import pointing down the wings (run -> discovery / report -> engine /
mechanisms -> privacy -> schema -> io -> data -> errors); and the design the code cites is in the tree."""

from __future__ import annotations

import ast
import re
from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[1] / "privsynth"
# A wing may import only wings of a lower rank (or itself); equal ranks may not import each other.
RANK = {"top": 7, "run": 6, "discovery": 5, "report": 5, "engine": 4, "mechanisms": 4, "privacy": 3, "schema": 2,
        "io": 1, "data": 0, "errors": -1}
# Modules at the top of the tree that sit on the lowest floor: everything may import them.
FLOOR_MODULES = {"privsynth.errors": "errors"}
# Subpackages that sit at the top although they live in a lower wing, with the reason. They may import
# anything; only the top may import them.
AT_THE_TOP = {
    "privsynth.cli": "the `privsynth` command runs the flows and the library: nothing imports it",
    "privsynth.privacy.audit": "the empirical privacy audit runs the mechanisms on neighbouring tables, so it "
                               "sits above them; it is privacy's by subject (issue 21), and nothing below imports it",
}
MAX_TOP_MODULES = 6
MAX_LINES = 450


def _modules() -> dict[str, Path]:
    found = {}
    for path in LIBRARY.rglob("*.py"):
        name = ".".join(path.relative_to(LIBRARY.parent).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the privsynth modules it imports, anywhere in its body (lazy imports count)."""
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("privsynth"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    targets.append(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names if alias.name.startswith("privsynth")]
            for target in targets:
                resolved = _resolve(target, modules)
                if resolved and resolved != name:
                    edges[name].add(resolved)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def wing(module: str) -> str:
    if module in FLOOR_MODULES:
        return FLOOR_MODULES[module]
    if any(module == top or module.startswith(top + ".") for top in AT_THE_TOP):
        return "top"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (LIBRARY / parts[1]).is_dir() else "top"


def test_at_most_six_modules_at_the_top_of_the_library():
    top = sorted(p.name for p in LIBRARY.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top


def test_no_import_circle():
    assert cycles(import_graph(_modules())) == []


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_imports_point_down_the_wings():
    upward = sorted(f"{module} -> {target}" for module, targets in import_graph(_modules()).items()
                    for target in targets
                    if wing(module) != wing(target) and RANK[wing(target)] >= RANK[wing(module)])
    assert upward == []


def test_every_wing_has_a_rank():
    wings = {p.name for p in LIBRARY.iterdir() if p.is_dir() and not p.name.startswith("__")}
    at_the_top = {name.split(".")[1] for name in AT_THE_TOP if name.count(".") == 1}
    assert wings - at_the_top == set(RANK) - {"top", *FLOOR_MODULES.values()}


def test_no_file_of_the_library_or_its_wiring_is_over_450_lines():
    roots = [LIBRARY, LIBRARY.parent / "flows", LIBRARY.parent / "tasks"]
    long = sorted(f"{p.relative_to(LIBRARY.parent)}: {n}" for root in roots for p in root.rglob("*.py")
                  if (n := len(p.read_text().splitlines())) > MAX_LINES)
    assert long == []


def _classes_raised_as_errors() -> list[tuple[str, str]]:
    """(module, class) of every class under privsynth/ whose bases name an Error, Exception or Fault."""
    found = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(b, ast.Name) and b.id.endswith(("Error", "Exception", "Fault")) for b in node.bases):
                found.append((name, node.name))
    return found


def test_every_error_class_lives_in_the_one_family_module():
    assert {module for module, _ in _classes_raised_as_errors()} == {"privsynth.errors"}


def test_every_error_class_is_a_privsynth_error():
    import privsynth.errors as errors

    classes = [getattr(errors, name) for _, name in _classes_raised_as_errors()]
    assert classes and all(issubclass(cls, errors.PrivsynthError) for cls in classes)
    refusals = [cls for cls in classes if issubclass(cls, errors.RefusalError)]
    assert all(issubclass(cls, ValueError) for cls in refusals)


def test_no_caller_tells_errors_apart_by_class_name():
    roots = [LIBRARY, LIBRARY.parent / "flows", LIBRARY.parent / "tasks"]
    named = sorted(str(p.relative_to(LIBRARY.parent)) for root in roots for p in root.rglob("*.py")
                   if "__name__ ==" in p.read_text().replace('__name__ == "__main__"', ""))
    assert named == []


# ---------------------------------------------------------------- the design the code cites is in the tree

REPO = LIBRARY.parent
CITING_ROOTS = ("privsynth", "flows", "tasks")
DOC_PATH = re.compile(r"docs/[\w./-]*?\.md")
SECTION_CITATION = re.compile(r"(docs/[\w./-]*?\.md),?\s+(?:sections?\s+)?(\d+(?:\.\d+)*)")
HEADING = re.compile(r"^#{1,6}\s+(\d+(?:\.\d+)*)\.?\s", re.M)


def _citing_sources() -> list[tuple[str, str]]:
    """(path, text) of every Python file of the library and its wiring."""
    return [(str(p.relative_to(REPO)), p.read_text())
            for root in CITING_ROOTS for p in sorted((REPO / root).rglob("*.py"))]


def _headings(doc: str) -> set[str]:
    return set(HEADING.findall((REPO / doc).read_text()))


def test_every_cited_doc_is_in_the_repository():
    cited = {(path, doc) for path, text in _citing_sources() for doc in DOC_PATH.findall(text)}
    assert {doc for _, doc in cited} >= {"docs/design.md", "docs/specs/rap.md"}  # the search finds citations
    assert sorted(f"{path}: {doc}" for path, doc in cited if not (REPO / doc).is_file()) == []


def test_every_cited_section_is_a_heading_of_its_doc():
    cited = {(path, doc, section) for path, text in _citing_sources()
             for doc, section in SECTION_CITATION.findall(text.replace("\n", " ")) if (REPO / doc).is_file()}
    assert len({c for c in cited if c[1] == "docs/design.md"}) >= 10
    missing = sorted(f"{path}: {doc} {section}" for path, doc, section in cited if section not in _headings(doc))
    assert missing == []


def test_the_design_keeps_the_team_numbering():
    """Sections 1 to 7 and the numbered privacy rules 5.1 to 5.8, so older citations map one to one."""
    headings = _headings("docs/design.md")
    assert {str(n) for n in range(1, 8)} | {f"5.{n}" for n in range(1, 9)} <= headings


def test_no_code_cites_a_design_or_spec_outside_the_repository():
    spec_names = [p.name for p in (REPO / "docs" / "specs").glob("*.md")]
    bare_spec = re.compile(r"(?<![\w/])(" + "|".join(re.escape(n) for n in spec_names) + r")") if spec_names else None
    outside = sorted(f"{path}: {m.group(0)!r}" for path, text in _citing_sources()
                     for pattern in (re.compile(r"\.\./shared|\bseeds/|\bDESIGN\b"), bare_spec) if pattern
                     for m in pattern.finditer(text))
    assert outside == []
