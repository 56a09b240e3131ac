"""A griffe extension: show the SDK's bound endpoint methods as the methods they are.

`Client` and `AsyncClient` define each endpoint as `search = _bind(ops.search)`: at run time
a method with the builder's docstring and parameters (`functools.wraps`), but to griffe's
static reading only an attribute with no docstring. This replaces each such attribute with a
function carrying the builder's docstring and parameters, and the type its `Call[T]` answers
(`T`), so the SDK reference shows what `help(docingest.Client.search)` shows. Static reading
is kept because importing the package for inspection would also run `docingest.__main__`.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_BOUND = re.compile(r"^_bind\(ops\.(?P<name>\w+)\)$")


class BoundMethods(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.name != "docingest":
            return
        operations = pkg["_operations"]
        for module, cls in (("_client", "Client"), ("_async_client", "AsyncClient")):
            owner = pkg[module][cls]
            for name, member in list(owner.members.items()):
                found = _BOUND.match(str(getattr(member, "value", "") or ""))
                if not (member.is_attribute and found):
                    continue
                build = operations[found["name"]]
                returns = build.returns
                if isinstance(returns, griffe.ExprSubscript) and str(returns.left) == "Call":
                    returns = returns.slice
                method = griffe.Function(
                    name,
                    parameters=build.parameters,
                    returns=returns,
                    docstring=build.docstring,
                    lineno=member.lineno,
                    endlineno=member.endlineno,
                )
                if cls == "AsyncClient":
                    method.labels.add("async")
                owner.set_member(name, method)
