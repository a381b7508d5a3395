"""The client's side: Graph, Operation and Tensor, GraphDef I/O, gradients, Session,
and the ``tf.*`` namespaces.

See docs/architecture.md for the layers and what each module owns.
"""
