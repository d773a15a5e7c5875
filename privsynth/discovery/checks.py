"""Simple CHECK constraints as public facts: ``col BETWEEN a AND b``, ``col >= a``, ``col IN (...)``.

Reads the text a catalogue renders (PostgreSQL's ``pg_get_constraintdef``, DuckDB's
``duckdb_constraints().expression``) or a dbt ``check`` constraint: comparisons of one column with
literals, joined by AND, with casts (``'a'::text``, ``CAST('2020-01-01' AS DATE)``) and PostgreSQL's
``col = ANY (ARRAY[...])`` form of IN. Anything else (OR, two columns, functions) states no domain this
reader can use, so the whole CHECK is skipped rather than half-read: never an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from privsynth.discovery.contract_facts import IN_SET, Where, bound_value, checked_range, domain_fact
from privsynth.discovery.public import PublicColumn
from privsynth.errors import ContractError

_TOKEN = re.compile(r"""\s*(?:
    (?P<str>'(?:[^']|'')*') | (?P<qid>"(?:[^"]|"")*") | (?P<num>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?) |
    (?P<op>>=|<=|<>|!=|::|=|<|>) | (?P<punct>[()\[\],]) | (?P<word>[A-Za-z_][A-Za-z0-9_$.]*) )""", re.X)
_TYPE_TAIL = {"varying", "precision", "without", "with", "time", "zone"}
_FLIP = {">=": "<=", "<=": ">=", ">": "<", "<": ">", "=": "="}
# The parser backtracks on ValueError (what int() and float() raise too): a CHECK it cannot read is skipped.
_UNREADABLE = "not a conjunction of one-column comparisons with literals"


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text.rstrip()):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(_UNREADABLE)
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return _without_casts(out)


def _without_casts(tokens: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``x::type`` -> ``x`` (casts say nothing about the domain)."""
    out, i = [], 0
    while i < len(tokens):
        if tokens[i] == ("op", "::"):
            i += 2  # the type's first word
            while i < len(tokens) and tokens[i][0] == "word" and tokens[i][1].lower() in _TYPE_TAIL:
                i += 1
            if i < len(tokens) and tokens[i][1] == "(":  # varchar(20), numeric(10,2)
                i = tokens.index(("punct", ")"), i) + 1
            if i + 1 < len(tokens) and tokens[i][1] == "[" and tokens[i + 1][1] == "]":
                i += 2
            continue
        out.append(tokens[i])
        i += 1
    return out


class _Parser:
    """Recursive descent over the tokens; atoms are (column, op, value) with op in >=, <=, >, <, in, notnull."""

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.t, self.i = tokens, 0

    def peek(self, ahead: int = 0) -> tuple[str, str]:
        return self.t[self.i + ahead] if self.i + ahead < len(self.t) else ("end", "")

    def word(self, *words: str) -> bool:
        kind, text = self.peek()
        if kind == "word" and text.upper() in words:
            self.i += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if self.peek()[1] != text:
            raise ValueError(_UNREADABLE)
        self.i += 1

    def conjunction(self) -> list[tuple]:
        atoms = self.term()
        while self.word("AND"):
            atoms += self.term()
        if self.peek()[0] == "word" and self.peek()[1].upper() == "OR":
            raise ValueError(_UNREADABLE)
        return atoms

    def term(self) -> list[tuple]:
        start = self.i
        try:
            return self.comparison()
        except ValueError:
            self.i = start
        self.expect("(")
        atoms = self.conjunction()
        self.expect(")")
        return atoms

    def operand(self) -> tuple[str, object]:
        kind, text = self.peek()
        if text == "(":
            self.i += 1
            inner = self.operand()
            self.expect(")")
            return inner
        if kind == "word" and text.upper() == "CAST" and self.peek(1)[1] == "(":
            self.i += 2
            inner = self.operand()
            depth = 1
            while depth:  # skip AS type [(n)] up to the closing parenthesis
                kind2, text2 = self.peek()
                if kind2 == "end":
                    raise ValueError(_UNREADABLE)
                depth += {"(": 1, ")": -1}.get(text2, 0) if kind2 == "punct" else 0
                self.i += 1
            return inner
        self.i += 1
        if kind == "str":
            return "literal", text[1:-1].replace("''", "'")
        if kind == "num":
            return "literal", int(text) if re.fullmatch(r"-?\d+", text) else float(text)
        if kind == "qid":
            return "column", text[1:-1].replace('""', '"')
        if kind == "word" and text.upper() not in ("AND", "OR", "NOT", "NULL", "TRUE", "FALSE", "ANY", "ARRAY"):
            return "column", text.rpartition(".")[2]
        raise ValueError(_UNREADABLE)

    def literals(self, close: str) -> list:
        values = []
        while True:
            kind, value = self.operand()
            if kind != "literal":
                raise ValueError(_UNREADABLE)
            values.append(value)
            if self.peek()[1] != ",":
                break
            self.i += 1
        self.expect(close)
        return values

    def comparison(self) -> list[tuple]:
        left = self.operand()
        if left[0] == "column" and self.word("IS"):
            if self.word("NOT") and self.word("NULL"):
                return [(left[1], "notnull", None)]
            raise ValueError(_UNREADABLE)
        if left[0] == "column" and self.word("BETWEEN"):
            low = self.operand()
            if not self.word("AND"):
                raise ValueError(_UNREADABLE)
            high = self.operand()
            if low[0] != "literal" or high[0] != "literal":
                raise ValueError(_UNREADABLE)
            return [(left[1], ">=", low[1]), (left[1], "<=", high[1])]
        if left[0] == "column" and self.word("IN"):
            self.expect("(")
            return [(left[1], "in", self.literals(")"))]
        kind, op = self.peek()
        if kind != "op" or op not in _FLIP:
            raise ValueError(_UNREADABLE)
        self.i += 1
        if op == "=" and left[0] == "column" and self.word("ANY"):  # PostgreSQL's rendering of IN
            opened = 0
            while self.peek()[1] == "(":  # ANY ((ARRAY[...])::text[]): the cast leaves its parentheses
                self.i += 1
                opened += 1
            if not opened or not self.word("ARRAY"):
                raise ValueError(_UNREADABLE)
            self.expect("[")
            values = self.literals("]")
            for _ in range(opened):
                self.expect(")")
            return [(left[1], "in", values)]
        right = self.operand()
        if left[0] == "literal" and right[0] == "column":
            left, right, op = right, left, _FLIP[op]
        if left[0] != "column" or right[0] != "literal":
            raise ValueError(_UNREADABLE)
        return [(left[1], "in" if op == "=" else op, [right[1]] if op == "=" else right[1])]


def check_atoms(expression: str) -> list[tuple]:
    """(column, op, value) atoms of a CHECK expression; [] when it is not a simple conjunction."""
    text = re.sub(r"^\s*CHECK\s*", "", expression, flags=re.I)
    try:
        parser = _Parser(_tokens(text))
        atoms = parser.conjunction()
        if parser.peek()[0] != "end":
            raise ValueError(_UNREADABLE)
    except ValueError:
        return []
    return atoms


def _column(name: str, columns: Iterable[str]) -> str | None:
    """The table's column a CHECK names (exact, else the one equal ignoring case: SQL folds unquoted names)."""
    columns = list(columns)
    if name in columns:
        return name
    folded = [c for c in columns if c.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None


def check_facts(expression: str, columns: Iterable[str], where: Where, label: str, entry: str) -> list[PublicColumn]:
    """The facts a CHECK states about ``columns`` (an unreadable CHECK, or a range end that is neither a
    number nor an ISO date, states none)."""
    facts = []
    for name, op, value in check_atoms(expression):
        column = _column(name, columns)
        if column is None:
            continue
        origin = where.origin(label)
        if op == "notnull":
            facts.append(PublicColumn(column, nullable=False, origins={"nullable": origin}))
        elif op == "in":
            fact = domain_fact(IN_SET, column, {"value_set": value}, where, entry, label)
            facts += [fact] if fact is not None else []
        else:
            try:
                bound_value(value, where, entry)
            except ContractError:
                continue  # a text comparison (name >= 'A') is no range of a number or a date
            low, high = (value, None) if op in (">=", ">") else (None, value)
            bounds = checked_range(low, high, where, entry, (op == ">", op == "<"))
            facts.append(PublicColumn(column, bounds=bounds, origins={"bounds": origin}))
    return facts
