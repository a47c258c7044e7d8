"""Running a cell the way IPython does.

Every statement runs; when the cell ends in an expression its value is returned (unless the
cell ends with ';'). Code is compiled with PyCF_ALLOW_TOP_LEVEL_AWAIT: a cell that awaits
becomes a coroutine and runs on the session's event loop (event_loop.py), the one
asyncio.get_event_loop() gives the cell, which also runs between cells; while it awaits, the
frontend's comm messages are served (event_loop.run_cell).
`from __future__` imports stay in force for later cells, as at the interactive prompt.
"""
import ast
import linecache

CO_COROUTINE = 0x80  # inspect.CO_COROUTINE, without importing inspect
NO_VALUE = object()


class CompiledCell:
    __slots__ = ("body", "last_expr", "quiet", "filename")

    def __init__(self, body, last_expr, quiet, filename):
        self.body = body            # code object for every statement but a final expression
        self.last_expr = last_expr  # code object evaluating the final expression, or None
        self.quiet = quiet          # the cell ends with ';': its value is not shown
        self.filename = filename


class CellRunner:
    def __init__(self, namespace):
        self.namespace = namespace
        self.future_flags = 0
        self._serial = 0

    def new_filename(self):
        self._serial += 1
        return "<belljar-cell-%d>" % self._serial

    @staticmethod
    def register_source(filename, text):
        """Make the cell's text visible to tracebacks, inspect.getsource and warnings."""
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)

    def parse(self, source, filename):
        flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT | self.future_flags
        return compile(source, filename, "exec", flags, dont_inherit=True)

    def compile(self, tree, source, filename):
        body = tree.body
        last = body.pop() if body and isinstance(body[-1], ast.Expr) else None
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT | self.future_flags
        body_code = None
        if body:
            body_code = compile(tree, filename, "exec", flags, dont_inherit=True)
            if any(isinstance(node, ast.ImportFrom) and node.module == "__future__"
                   for node in body):
                self.future_flags |= body_code.co_flags & _future_flag_mask()
        expr_code = quiet = None
        if last is not None:
            expr_code = compile(ast.Expression(last.value), filename, "eval", flags,
                                dont_inherit=True)
            quiet = _ends_with_semicolon(source, last)
        return CompiledCell(body_code, expr_code, bool(quiet), filename)

    def run(self, cell):
        namespace = self.namespace
        if cell.body is not None:
            outcome = eval(cell.body, namespace)
            if cell.body.co_flags & CO_COROUTINE:
                self.run_coroutine(outcome)
        if cell.last_expr is None:
            return NO_VALUE
        value = eval(cell.last_expr, namespace)
        if cell.last_expr.co_flags & CO_COROUTINE:
            value = self.run_coroutine(value)
        return value

    def run_coroutine(self, coro):
        import asyncio

        from .event_loop import run_cell, session_loop
        loop = session_loop()
        task = loop.create_task(coro)
        try:
            return run_cell(loop, task)
        except BaseException:
            if not task.done():  # interrupted while the loop waited: cancel the cell's task
                task.cancel()
                try:
                    loop.run_until_complete(asyncio.wait({task}, timeout=1.0))
                except BaseException:
                    pass
            raise


def without_leading_indent(code):
    """The cell with its first line's indentation taken off every line that starts with it,
    as IPython's input cleanup does: code pasted from inside a function or a test's string
    runs as it reads. Blank lines are kept, so line numbers stay the cell's."""
    lines = code.splitlines(True)
    first = next((line for line in lines if line.strip()), "")
    indent = first[:len(first) - len(first.lstrip(" \t"))]
    if not indent:
        return code
    return "".join(line[len(indent):] if line.startswith(indent) else line for line in lines)


def _ends_with_semicolon(source, node):
    lines = source.splitlines(True)
    if node.end_lineno is None or node.end_lineno > len(lines):
        return False
    tail_line = lines[node.end_lineno - 1].encode("utf-8")[node.end_col_offset:]
    rest = tail_line.decode("utf-8", "replace") + "".join(lines[node.end_lineno:])
    return rest.lstrip().startswith(";")


_FUTURE_MASK = None


def _future_flag_mask():
    global _FUTURE_MASK
    if _FUTURE_MASK is None:
        import __future__
        mask = 0
        for name in __future__.all_feature_names:
            mask |= getattr(__future__, name).compiler_flag
        _FUTURE_MASK = mask
    return _FUTURE_MASK
