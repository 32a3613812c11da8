"""The bounded YAML loader (gpuplan.safeio.load_yaml's), apart so that PyYAML loads only where YAML
is read: a workload given as a model name or JSON, and the catalog, need none of it."""

from __future__ import annotations

from typing import Any

import yaml

from gpuplan.safeio import MAX_DEPTH, MAX_YAML_NODES


class LimitError(Exception):
    pass


class DuplicateKeyError(Exception):
    def __init__(self, key: object, line: int, first: int) -> None:
        super().__init__(key, line, first)
        self.key, self.line, self.first = key, line, first


class BoundedSafeLoader(yaml.SafeLoader):
    """yaml.SafeLoader with bounded nesting (MAX_DEPTH) and a bounded size after alias expansion
    (MAX_YAML_NODES), counted as the document is composed, so an alias bomb stops after a few
    thousand nodes of work instead of being built."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._sizes: dict[int, int] = {}

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            node = super().compose_node(parent, index)
            if node is None or id(node) not in self._sizes:
                raise LimitError("an alias refers to the node that holds it (a recursive alias)")
            return node
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise LimitError(f"it nests more than {MAX_DEPTH} levels deep")
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is None:  # pragma: no cover - the composer returns None only at the stream's end
            return None
        size = 1
        if isinstance(node, yaml.SequenceNode):
            size += sum(self._sizes[id(child)] for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            size += sum(self._sizes[id(k)] + self._sizes[id(v)] for k, v in node.value)
        if size > MAX_YAML_NODES:
            raise LimitError(f"it expands to more than {MAX_YAML_NODES:,} values (aliases counted each time used)")
        self._sizes[id(node)] = size
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """The safe loader's mapping, refusing a key written twice: PyYAML keeps the last one
        silently, and YAML 1.2 (section 3.2.1.1) requires a mapping's keys to be unique. Keys
        brought in by a merge (`<<: *base`) may be overridden, as the merge-key spec allows."""
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    if key in seen:
                        raise DuplicateKeyError(key, line, seen[key])
                    seen[key] = line
                except TypeError:  # an unhashable key: the constructor refuses it below
                    continue
        return super().construct_mapping(node, deep=deep)
