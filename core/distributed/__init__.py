"""The processes of a cluster: the wire protocol and its service handlers and clients,
the GraphDef form of the step IR, servers, cluster specs, shared memory.

See docs/architecture.md for the layers and what each module owns.
"""
