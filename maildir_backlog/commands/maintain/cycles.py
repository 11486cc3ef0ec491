"""Dependency cycles (bucket 5): every elementary cycle once, found within a fixed budget.

Pure graph code: `{slug: {dependency slugs}}` in, cycles out. Strongly connected components
first (Tarjan, iterative), then Johnson-style searches inside each component, each cycle
started from its smallest member so that it is found exactly once.

>>> find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}, "e": {"a"}})
([['a', 'b', 'c', 'a'], ['d', 'd']], True)
"""

from __future__ import annotations

from collections.abc import Iterator

MAX_CYCLES = 100
CYCLE_SEARCH_STEPS = 200_000


def _components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    result: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                result.append(_pop_component(stack, on_stack, node))
    return result


def _pop_component(stack: list[str], on_stack: set[str], root: str) -> list[str]:
    """Tarjan's component rooted at `root`: the stack's nodes down to it, popped, sorted."""
    component = []
    while True:
        member = stack.pop()
        on_stack.discard(member)
        component.append(member)
        if member == root:
            return sorted(component)


def find_cycles(graph: dict[str, set[str]]) -> tuple[list[list[str]], bool]:
    """Every elementary cycle once, rotated to start at its smallest slug, e.g. [a, b, c, a].

    Returns (cycles, complete): the search stops after MAX_CYCLES cycles or a step budget.
    """
    graph = {node: {d for d in deps if d in graph} for node, deps in graph.items()}
    cycles: list[list[str]] = []
    steps = 0
    for component in _components(graph):
        if len(component) == 1:
            node = component[0]
            if node in graph[node]:
                cycles.append([node, node])
            continue
        members = set(component)
        for i, start in enumerate(component):
            allowed = members.difference(component[:i])
            path = [start]
            on_path = {start}
            work = [iter(sorted(graph[start] & allowed))]
            while work:
                steps += 1
                if steps > CYCLE_SEARCH_STEPS or len(cycles) >= MAX_CYCLES:
                    return sorted(cycles), False
                nxt = next(work[-1], None)
                if nxt is None:
                    work.pop()
                    on_path.discard(path.pop())
                elif nxt == start:
                    cycles.append([*path, start])
                elif nxt not in on_path:
                    path.append(nxt)
                    on_path.add(nxt)
                    work.append(iter(sorted(graph[nxt] & allowed)))
    return sorted(cycles), True
