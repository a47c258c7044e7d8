"""The structure counts issue 40 set, printed, and held: exits 1 when one is exceeded.

  build/venvs/lint/bin/python scripts/structure_counts.py [--root DIR]

The supervisor's heart grew into one class of ~115 methods whose state every file could touch,
and the broker into one 550-line function; nothing but care stopped either. These are the
numbers CI holds (`build: the structure counts hold`, tests/CMakeLists.txt), each a row of
RULES below:

- `Kernel` (kernel/session/kernel.hpp) declares at most 40 member functions and 20 fields.
- `Kernel::` methods are defined only in the core's files (KERNEL_CORE_FILES): no link's .cpp
  (worker_link.cpp, cell_limits.cpp, ...) reaches into the Kernel; a link is a class of its own.
- No function in kernel/ or sandbox/ is over 120 lines.
- Nothing hides from lizard: a `#lizard forgive` comment drops a function from its list, and
  a comment saying `GENERATED CODE` ends the file's analysis there; either is refused.

How it counts. Function lengths are lizard's (PyPI, pinned in requirements/lint.txt): first
line to last, lambdas inside counted with their function. A data table is recognised as lizard
does: an initializer at namespace or class scope is no function, whatever its length; a table
built inside a function counts toward that function's lines. Which file defines which
`Kernel::` method is lizard's too (its qualified names: a component `Kernel` before the last).
Lizard sees definitions, not declarations, so Kernel's members are counted here, on lizard's
C++ tokens (comments and strings are its business), over the class body of our clang-formatted
header, one member declaration at a time (up to `;` at the body's level, or a function body's
`}`):
- a member function: a declaration whose declarator has a parameter list, or `operator`;
  constructors, the destructor, static, inline and defaulted ones count, `= delete` ones don't;
- a field: any other data member, each declarator of `a, b;` once; a `static constexpr`
  constant is no field (no state); any other static data member is;
- neither: access labels, `friend`, `using`, `typedef`, `static_assert`, and nested types
  (`struct Cell`), whose own members are the nested type's, not the Kernel's.
"""

import argparse
import sys
from pathlib import Path

try:
    import lizard
    from lizard_languages import CLikeReader
except ImportError:
    sys.exit(
        "structure_counts: lizard is not installed; run with the lint venv's Python "
        "(build/venvs/lint/bin/python, made by scripts/python-env.sh lint)"
    )

KERNEL_HEADER = "kernel/session/kernel.hpp"
KERNEL_CLASS = "Kernel"
MAX_KERNEL_FUNCTIONS = 40
MAX_KERNEL_FIELDS = 20
# The Kernel's own files: the reactor, the request queue's dispatch and the wiring. Any other
# file that defines a `Kernel::` method is refused.
KERNEL_CORE_FILES = (
    KERNEL_HEADER,
    "kernel/session/kernel.cpp",
    "kernel/session/reactor.cpp",
    "kernel/session/requests.cpp",
    # The core's side of the worker: its start and exits, what each frame means for the running
    # request (the channel itself is the worker link's).
    "kernel/session/worker.cpp",
)
MEASURED_FOLDERS = ("kernel", "sandbox")
SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".h", ".hpp")
MAX_FUNCTION_LINES = 120
# Comments that make lizard skip a function or the rest of a file.
LIZARD_ESCAPES = ("#lizard forgive", "GENERATED CODE")

OPENING = {"(": ")", "[": "]", "{": "}"}
ACCESS = ("public", "private", "protected")
NOT_MEMBERS = ("friend", "using", "typedef", "static_assert")
TYPE_KEYS = ("struct", "class", "union", "enum")


def sources(root):
    for folder in MEASURED_FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in SOURCE_SUFFIXES and path.is_file():
                yield path


def code_tokens(text):
    """lizard's C++ tokens, less blanks, comments and preprocessor lines."""
    for token in CLikeReader.generate_tokens(text):
        if token.isspace() or token.startswith(("//", "/*", "#")):
            continue
        yield token


def class_body(tokens, name):
    """The tokens between the braces of `class name {...}` (not a forward declaration)."""
    for i in range(len(tokens) - 1):
        if tokens[i] not in ("class", "struct") or tokens[i + 1] != name:
            continue
        j = i + 2
        while j < len(tokens) and tokens[j] not in ("{", ";"):
            j += 1
        if j == len(tokens) or tokens[j] == ";":
            continue
        depth = 0
        for k in range(j, len(tokens)):
            if tokens[k] in OPENING:
                depth += 1
            elif tokens[k] in OPENING.values():
                depth -= 1
                if depth == 0:
                    return tokens[j + 1 : k]
    raise SystemExit("structure_counts: no `class {}` body found".format(name))


def starts_type(member):
    return bool(member) and member[0] in TYPE_KEYS


def member_declarations(body):
    """The class body cut into member declarations: at `;` on the body's level, or where a
    function body's `}` comes back to it (no `;` follows an inline definition)."""
    members, current, depth = [], [], 0
    i = 0
    while i < len(body):
        token = body[i]
        following = body[i + 1] if i + 1 < len(body) else ""
        if depth == 0 and not current and token in ACCESS and following == ":":
            i += 2
            continue
        current.append(token)
        if token in OPENING:
            depth += 1
        elif token in OPENING.values():
            depth -= 1
            # A braced initializer goes on (`;`, `,` of a constructor's initializers, `{` of
            # its body); so does a nested type's definition (`struct X {...} x;`).
            if (
                token == "}"
                and depth == 0
                and following not in (";", ",", "{")
                and not starts_type(current)
            ):
                members.append(current)
                current = []
        elif token == ";" and depth == 0:
            members.append(current)
            current = []
        i += 1
    if current:
        members.append(current)
    return members


def skip_group(tokens, i, opening, closing):
    """The index after the group opening at tokens[i] (`<...>`, `[[...]]`)."""
    depth = 0
    while i < len(tokens):
        if tokens[i] == opening:
            depth += 1
        elif tokens[i] == closing:
            depth -= 1
        elif opening == "<" and tokens[i] == ">>":
            depth -= 2
        i += 1
        if depth <= 0:
            return i
    return i


def declarators(tokens):
    """The declarators of a data member's declaration (`a = 1, b{2}` is two)."""
    count, depth, angle, initializing = 1, 0, 0, False
    for token in tokens:
        if token in OPENING:
            if token == "{" and depth == 0:
                initializing = True
            depth += 1
        elif token in OPENING.values():
            depth -= 1
        elif depth == 0 and not initializing and token == "<":
            angle += 1
        elif depth == 0 and not initializing and token in (">", ">>"):
            angle -= len(token)
        elif depth == 0 and token == "=":
            initializing = True
        elif depth == 0 and angle <= 0 and token == ",":
            count += 1
            initializing = False
    return count


def classify(member):
    """("function" | "deleted" | "field" | "constant" | "other", how many)."""
    tokens = [t for t in member if t != ";"]
    i = 0
    while i < len(tokens) and tokens[i] == "[":  # attributes, [[nodiscard]]
        i = skip_group(tokens, i, "[", "]")
    if i < len(tokens) and tokens[i] == "template":
        i = skip_group(tokens, i + 1, "<", ">")
    tokens = tokens[i:]
    if not tokens or tokens[0] in NOT_MEMBERS:
        return "other", 0
    if tokens[0] in TYPE_KEYS:
        if "{" not in tokens:
            # `struct Name;` declares a type; `struct Name* p;` a field.
            return ("other", 0) if len(tokens) <= 2 else ("field", declarators(tokens[2:]))
        close = len(tokens) - 1 - tokens[::-1].index("}")
        after = tokens[close + 1 :]
        return ("field", declarators(after)) if after else ("other", 0)
    # The declarator's head: up to the first `=`, `{` or `:` outside parentheses and templates.
    depth = angle = 0
    for k, token in enumerate(tokens):
        if token == "operator":
            return function_kind(tokens)
        if token == "(" and depth == 0 and angle <= 0:
            after = tokens[k + 1 : k + 4]
            pointer = after[:1] in (["*"], ["&"]) or (
                len(after) == 3 and after[1] == "::" and after[2] == "*"
            )
            return ("field", 1) if pointer else function_kind(tokens)
        if token in OPENING:
            depth += 1
        elif token in OPENING.values():
            depth -= 1
        elif token == "<":
            angle += 1
        elif token in (">", ">>"):
            angle -= len(token)
        elif depth == 0 and angle <= 0 and token in ("=", "{", ":"):
            break
    if "static" in tokens and "constexpr" in tokens:
        return "constant", declarators(tokens)
    return "field", declarators(tokens)


def function_kind(tokens):
    deleted = len(tokens) >= 2 and tokens[-2:] == ["=", "delete"]
    return ("deleted", 1) if deleted else ("function", 1)


def kernel_members(root):
    text = (root / KERNEL_HEADER).read_text(encoding="utf-8")
    body = class_body(list(code_tokens(text)), KERNEL_CLASS)
    counts = {"function": 0, "deleted": 0, "field": 0, "constant": 0, "other": 0}
    for member in member_declarations(body):
        kind, n = classify(member)
        counts[kind] += n
    return counts


def defines_kernel_method(function):
    return KERNEL_CLASS in function.name.split("::")[:-1]


def measure(root):
    """Each rule's name, its limit, what was found, and the findings over it."""
    members = kernel_members(root)
    outside_core, long_functions, escapes = {}, [], []
    for path in sources(root):
        relative = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8", errors="replace")
        escapes += ["{}: {}".format(relative, e) for e in LIZARD_ESCAPES if e in text]
        for function in lizard.analyze_file.analyze_source_code(relative, text).function_list:
            if function.length > MAX_FUNCTION_LINES:
                long_functions.append(
                    "{}:{} {} ({} lines)".format(
                        relative, function.start_line, function.long_name, function.length
                    )
                )
            if defines_kernel_method(function) and relative not in KERNEL_CORE_FILES:
                outside_core[relative] = outside_core.get(relative, 0) + 1
    return [
        ("Kernel's member functions", MAX_KERNEL_FUNCTIONS, members["function"], []),
        ("Kernel's fields", MAX_KERNEL_FIELDS, members["field"], []),
        (
            "files outside the Kernel's core defining Kernel:: methods",
            0,
            len(outside_core),
            ["{} ({} methods)".format(f, n) for f, n in sorted(outside_core.items())],
        ),
        (
            "functions over {} lines in {}".format(MAX_FUNCTION_LINES, ", ".join(MEASURED_FOLDERS)),
            0,
            len(long_functions),
            long_functions,
        ),
        ("comments that hide code from lizard", 0, len(escapes), escapes),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(__file__).resolve().parent.parent,
        help="the source tree (default: this checkout)",
    )
    args = parser.parse_args()
    exceeded = 0
    for name, limit, found, findings in measure(args.root):
        verdict = "ok" if found <= limit else "EXCEEDED"
        exceeded += found > limit
        print("{}: {} (at most {}) {}".format(name, found, limit, verdict))
        for finding in findings:
            print("  " + finding)
    return 1 if exceeded else 0


if __name__ == "__main__":
    sys.exit(main())
