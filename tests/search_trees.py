"""Hand-built trees for the search tests."""

from adaexplore.search import NodeView, SearchParams, TreeIndex

P = SearchParams()


def tree(*rows):
    """rows: (id, parent, action, status, speedup); seq = position; the root is added."""
    out = [NodeView("root", None, "root", None, None, 0)]
    for k, (i, p, a, st, sp) in enumerate(rows, start=1):
        out.append(NodeView(i, p, a, st, sp, k))
    return out


def build(nodes, pending=(), params=P, now=1000.0):
    return TreeIndex.build(nodes, list(pending), params, now)
